import json
def ds(): return {"type": "prometheus", "uid": "${datasource}"}
def panel(pid, title, exprs, x, y, w=12, h=8, kind="timeseries", unit=None, desc="", legend=None, extra=None):
    p = {"id": pid, "type": kind, "title": title, "description": desc, "datasource": ds(),
         "gridPos": {"x": x, "y": y, "w": w, "h": h},
         "targets": [{"refId": chr(65+i), "datasource": ds(), "expr": e, "legendFormat": (legend[i] if legend else "")} for i, e in enumerate(exprs)],
         "fieldConfig": {"defaults": {}, "overrides": []}, "options": {}}
    if unit: p["fieldConfig"]["defaults"]["unit"] = unit
    if extra: p.update(extra)
    return p
def var_ds(): return {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}
def var_q(name, q, label, multi=False):
    return {"name": name, "label": label, "type": "query", "datasource": ds(), "query": {"query": q, "refId": "v"}, "definition": q,
            "refresh": 2, "includeAll": multi, "multi": multi, "sort": 1}
def dash(uid, title, desc, vars, panels):
    return {"uid": uid, "title": title, "description": desc, "tags": ["trainrun", "slurm"], "timezone": "utc", "schemaVersion": 39,
            "editable": True, "time": {"from": "now-24h", "to": "now"}, "refresh": "30s",
            "templating": {"list": vars}, "panels": panels, "annotations": {"list": [
                {"name": "Interruptions", "datasource": ds(), "enable": True, "iconColor": "red",
                 "expr": 'changes(sum by (job_id) (trainrun_interruptions_total{JOBSEL})[2m:30s]) > 0'}]}}
J = 'job_id="$job_id"'
run = dash("trainrun-run", "trainrun: run", "One training run across its incarnations: speed against the plan, checkpoints, interruptions and lost work.",
  [var_ds(), var_q("job_id", "label_values(trainrun_layout_info, job_id)", "Slurm job")], [
  panel(1, "State", [f'max by (state) (trainrun_state{{{J}}}) == 1'], 0, 0, 6, 4, "stat", None, "running, checkpointing, requeued, finished, stopped or failed", ["{{state}}"],
        {"options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}, "textMode": "name"}}),
  panel(2, "Layout", [f'trainrun_layout_info{{{J}}}'], 6, 0, 10, 4, "table", None, "Parallel degrees, GPUs and nodes of the running incarnation", None,
        {"targets": [{"refId": "A", "datasource": ds(), "expr": f'max by (tp, pp, vpp, cp, ep, dp, mbs, gpus, nodes, gpu_type) (trainrun_layout_info{{{J}}})', "format": "table", "instant": True}]}),
  panel(3, "Restarts", [f'max(trainrun_restart_count{{{J}}})'], 16, 0, 4, 4, "stat"),
  panel(4, "Newest checkpoint age", [f'time() - max(trainrun_checkpoint_last_commit_timestamp_seconds{{{J}}})'], 20, 0, 4, 4, "stat", "s"),
  panel(5, "Step time: predicted vs observed", [f'max(trainrun_step_time_predicted_seconds{{{J}}})', f'max(trainrun_step_time_observed_seconds{{{J}}})'], 0, 4, 12, 8, unit="s", legend=["predicted", "observed"]),
  panel(6, "MFU: predicted vs observed", [f'max(trainrun_mfu_predicted_ratio{{{J}}})', f'max(trainrun_mfu_observed_ratio{{{J}}})'], 12, 4, 12, 8, unit="percentunit", legend=["predicted", "observed"]),
  panel(7, "Trainer step", [f'max(trainrun_trainer_step{{{J}}})'], 0, 12, 12, 8, legend=["step"]),
  panel(8, "Throughput (tokens/s)", [f'max(trainrun_throughput_predicted_tokens_per_second{{{J}}})', f'max(trainrun_throughput_observed_tokens_per_second{{{J}}})'], 12, 12, 12, 8, unit="short", legend=["predicted", "observed"]),
  panel(9, "Checkpoint duration (p50, p95)", [f'histogram_quantile(0.5, sum by (le, phase) (rate(trainrun_checkpoint_duration_seconds_bucket{{{J}}}[$__rate_interval])))',
        f'histogram_quantile(0.95, sum by (le, phase) (rate(trainrun_checkpoint_duration_seconds_bucket{{{J}}}[$__rate_interval])))'], 0, 20, 8, 8, unit="s", legend=["p50 {{phase}}", "p95 {{phase}}"]),
  panel(10, "Checkpoint size and committed bytes", [f'max(trainrun_checkpoint_size_bytes{{{J}}})', f'max(trainrun_checkpoint_committed_bytes_total{{{J}}})'], 8, 20, 8, 8, unit="bytes", legend=["newest", "all committed"]),
  panel(11, "Grace margin", [f'min(trainrun_grace_margin_seconds{{{J}}})', f'max(trainrun_grace_budget_seconds{{{J}}})'], 16, 20, 8, 8, unit="s", desc="Time left before the deadline when the interruption's checkpoint committed; below 0 it did not fit", legend=["margin", "grace budget"]),
  panel(12, "Interruptions, requeues, crashes", [f'max by (cause) (trainrun_interruptions_total{{{J}}})', f'max(trainrun_requeues_total{{{J}}})', f'max by (cause) (trainrun_crashes_total{{{J}}})',
        f'max by (cause) (trainrun_checkpoint_failures_total{{{J}}})'], 0, 28, 12, 8, legend=["interrupted: {{cause}}", "requeued", "crashed: {{cause}}", "checkpoint failed: {{cause}}"]),
  panel(13, "Work lost", [f'max(trainrun_work_lost_seconds_sum{{{J}}})', f'max(trainrun_work_lost_seconds_count{{{J}}})'], 12, 28, 6, 8, "stat", "s", legend=["total lost", "interruptions"]),
  panel(14, "Drain throughput", [f'max(trainrun_drain_throughput_bytes_per_second{{{J}}})', f'sum(rate(trainrun_drain_bytes_total{{{J}}}[$__rate_interval])) / sum(rate(trainrun_drain_seconds_total{{{J}}}[$__rate_interval]))'], 18, 28, 6, 8, unit="Bps", legend=["last drain", "average"]),
])
P = 'partition=~"$partition"'
part = dash("trainrun-partition", "trainrun: partition", "Every trainrun job of a partition: who runs, how fast against plan, and what preemption and failures cost.",
  [var_ds(), var_q("partition", "label_values(trainrun_layout_info, partition)", "Partition", True)], [
  panel(1, "Running jobs", [f'count(trainrun_state{{{P},state="running"}} == 1)'], 0, 0, 6, 4, "stat"),
  panel(2, "GPUs in running trainrun jobs", [f'sum(max by (job_id) (trainrun_gpus{{{P}}}) and on (job_id) max by (job_id) (trainrun_state{{{P},state=~"running|checkpointing"}} == 1))'], 6, 0, 6, 4, "stat"),
  panel(3, "Interruptions (24h) by cause", [f'sum by (cause) (increase(trainrun_interruptions_total{{{P}}}[24h]))'], 12, 0, 6, 4, "stat", legend=["{{cause}}"]),
  panel(4, "Work lost (24h)", [f'sum(increase(trainrun_work_lost_seconds_sum{{{P}}}[24h]))'], 18, 0, 6, 4, "stat", "s"),
  panel(5, "Observed / predicted MFU per job", [f'max by (job_id) (trainrun_mfu_observed_ratio{{{P}}}) / max by (job_id) (trainrun_mfu_predicted_ratio{{{P}}})'], 0, 4, 12, 8, unit="percentunit", legend=["{{job_id}}"]),
  panel(6, "Newest checkpoint age per job", [f'time() - max by (job_id) (trainrun_checkpoint_last_commit_timestamp_seconds{{{P}}})'], 12, 4, 12, 8, unit="s", legend=["{{job_id}}"]),
  panel(7, "Requeues and crashes per hour", [f'sum by (job_id) (increase(trainrun_requeues_total{{{P}}}[1h]))', f'sum by (job_id, cause) (increase(trainrun_crashes_total{{{P}}}[1h]))'], 0, 12, 12, 8, legend=["requeued {{job_id}}", "crashed {{job_id}} {{cause}}"]),
  panel(8, "Checkpoint duration p95 (save, commit)", [f'histogram_quantile(0.95, sum by (le, phase) (rate(trainrun_checkpoint_duration_seconds_bucket{{{P}}}[$__rate_interval])))'], 12, 12, 12, 8, unit="s", legend=["{{phase}}"]),
  panel(9, "Grace margin per job (negative: the checkpoint did not fit)", [f'min by (job_id) (trainrun_grace_margin_seconds{{{P}}})'], 0, 20, 12, 8, unit="s", legend=["{{job_id}}"]),
  panel(10, "Stuck jobs (no step for 15 min while running)", [f'(time() - max by (job_id) (trainrun_trainer_progress_timestamp_seconds{{{P}}}) > 900) and on (job_id) max by (job_id) (trainrun_state{{{P},state="running"}} == 1)'], 12, 20, 12, 8, "table", "s", legend=["{{job_id}}"]),
])
for d in (run, part):
    for a in d["annotations"]["list"]:
        a["expr"] = a["expr"].replace("{JOBSEL}", "{" + (J if d is run else P) + "}")
json.dump(run, open("grafana-run.json", "w"), indent=2); open("grafana-run.json", "a").write("\n")
json.dump(part, open("grafana-partition.json", "w"), indent=2); open("grafana-partition.json", "a").write("\n")
