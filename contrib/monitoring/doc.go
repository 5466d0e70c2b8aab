// Package monitoring holds no code: it is the home of trainrun's Prometheus
// alert rules, their promtool unit tests and the Grafana dashboards, and of
// the Go test that checks them against the metrics trainrun exports
// (wrapper/obs) and runs promtool on them when it is installed.
package monitoring
