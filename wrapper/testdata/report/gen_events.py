# A realistic four-incarnation run of a Llama-8B-like job on 16 GPUs: a time
# limit, a preemption, a crash (a node failed 7 minutes after the last
# checkpoint), and the finish.
import json, datetime as dt
t0 = dt.datetime(2026,11,29,9,0,0,tzinfo=dt.timezone.utc)
def T(s): return (t0+dt.timedelta(seconds=s)).isoformat().replace("+00:00","Z")
def ns(s): return int(s*1e9)
J="7001"
start = {"partition":"lowprio","job_name":"llama-8b","nodes":2,"gpus":16,"gpu_type":"h100-sxm","layout":{"tp":2,"pp":1,"vpp":1,"cp":1,"ep":1,"dp":8,"mbs":1},
 "pred_step_s":2.0,"pred_mfu":0.41,"pred_tokens_per_s":65536,"tokens_per_step":131072,"ckpt_lead":ns(120),"grace_budget":ns(60),"ckpt_dir":"/scratch/ck"}
ev=[]
def e(t,kind,r,**k): ev.append(dict(time=T(t),kind=kind,job_id=J,restart=r,**k))
ST=2.3 # observed seconds per step
def train(r,t_from,t_to,step0):
    s=step0; t=t_from+20
    while t+60<=t_to:
        t+=60; s=step0+int((t-t_from-20)/ST); e(t,"progress",r,step=s,tokens=s*131072)
    return s
GB=96*2**30
# 0: time limit at 1800 s, checkpoint every 10 min
e(0,"start",0,start=dict(start,end_time=T(1800)))
train(0,0,1680,0)
e(600,"ckpt-commit",0,ckpt={"tag":"step_252","step":252,"bytes":GB,"complete_at":T(596),"commit":ns(4)})
e(1200,"ckpt-commit",0,ckpt={"tag":"step_513","step":513,"bytes":GB,"complete_at":T(1195),"commit":ns(5)})
e(1680,"interrupt",0,cause="time-limit"); e(1680,"ckpt-request",0,why="time-limit")
e(1712,"ckpt-commit",0,ckpt={"tag":"step_721","step":721,"bytes":GB,"complete_at":T(1706),"save":ns(26),"commit":ns(6)})
e(1713,"end",0,cause="requeued",exit=6)
# 1: preempted
b=1740
e(b,"start",1,start=dict(start,resume_from="/scratch/ck/step_721",end_time=T(b+1800)))
train(1,b,b+960,721)
e(b+600,"ckpt-commit",1,ckpt={"tag":"step_964","step":964,"bytes":GB,"complete_at":T(b+595),"commit":ns(5)})
e(b+960,"interrupt",1,cause="preempted")
e(b+1001,"ckpt-commit",1,ckpt={"tag":"step_1129","step":1129,"bytes":GB,"complete_at":T(b+995),"save":ns(35),"commit":ns(6)})
e(b+1002,"end",1,cause="requeued",exit=6)
# 2: a node fails 7 minutes after its checkpoint
c=b+1002+190
e(c,"start",2,start=dict(start,resume_from="/scratch/ck/step_1129",end_time=T(c+1800)))
train(2,c,c+1020,1129)
e(c+600,"ckpt-commit",2,ckpt={"tag":"step_1381","step":1381,"bytes":GB,"complete_at":T(c+594),"commit":ns(6)})
e(c+1020,"end",2,cause="crash",crash="step-failed",exit=5,message="rank 9 (node gpu-b07, GPU 1) failed first with exit 134; srun exited with 1")
# 3: requeued by Slurm (node failure), finishes
d=c+1020+150
e(d,"start",3,start=dict(start,resume_from="/scratch/ck/step_1381",end_time=T(d+1800)))
train(3,d,d+620,1381)
e(d+640,"ckpt-commit",3,ckpt={"tag":"step_1636","step":1636,"bytes":GB,"complete_at":T(d+634),"commit":ns(6)})
e(d+641,"end",3,cause="finished")
for x in ev: print(json.dumps(x))
