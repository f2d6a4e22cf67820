#!/usr/bin/env python3
"""Writes weir's Grafana dashboards (import format) from the panel lists below.

Run `python3 dashboards/generate.py` after changing a panel; the test suite evaluates every
expression of every panel against a real Prometheus scraping a real consumer, so a panel
that queries a metric weir does not emit fails CI.
"""
import json
import os

DS = {"type": "prometheus", "uid": "${datasource}"}
Q = '{queue="$queue"}'


def panel(title, exprs, unit="short", x=0, y=0, w=12, h=8, description=""):
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"h": h, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                    "tooltip": {"mode": "multi", "sort": "none"}},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DS, "expr": e, "legendFormat": legend}
            for i, (legend, e) in enumerate(exprs)
        ],
    }


def quantiles(metric, qs=(0.5, 0.95, 0.99)):
    return [(f"p{int(q * 100)}",
             f'histogram_quantile({q}, sum by (le) (rate({metric}_bucket{Q}[$__rate_interval])))')
            for q in qs]


def dashboard(uid, title, description, panels):
    # Lay panels out two per row.
    for i, p in enumerate(panels):
        p["id"] = i + 1
        p["gridPos"].update({"x": (i % 2) * 12, "y": (i // 2) * 8})
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["weir"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "10s",
        "time": {"from": "now-30m", "to": "now"},
        "templating": {"list": [
            {"type": "datasource", "name": "datasource", "label": "Data source", "query": "prometheus",
             "hide": 0},
            {"type": "query", "name": "queue", "label": "Queue", "datasource": DS,
             "query": {"query": "label_values(weir_jobs_fetched_total, queue)", "refId": "queue"},
             "refresh": 2,
             "includeAll": False, "multi": False, "sort": 1, "hide": 0},
        ]},
        "annotations": {"list": []},
        "panels": panels,
    }


def depth(metric):
    """A queue gauge every consumer samples: once per partition, the partitions added."""
    return f"sum(max by (partition) ({metric}{Q}))"


def rate(metric, by=""):
    group = f"sum by ({by}) " if by else "sum "
    return f"{group}(rate({metric}{Q}[$__rate_interval]))"


def queue_rate(event):
    """The rate of one of the queue's counters in Redis (weir_queue_jobs_total), which every
    consumer samples: once per partition, the partitions added."""
    sel = '{queue="$queue",event="%s"}' % event
    return f"sum(max by (partition) (rate(weir_queue_jobs_total{sel}[$__rate_interval])))"


LIMIT_PANELS = [
    panel("Concurrency limit vs in flight", [
        ("limit", f"sum(weir_concurrency_limit{Q})"),
        ("running (weir_jobs_in_flight)", f"sum(weir_jobs_in_flight{Q})"),
        ("floor", f"sum(weir_limiter_min_concurrency{Q})"),
    ], description="The limit the pool enforces, summed over consumers, against the jobs running."),
    panel("Limiter: window p95 vs target", [
        ("window p95", f"max(weir_limiter_window_p95_seconds{Q})"),
        ("target", f"max(weir_limiter_target_p95_seconds{Q})"),
    ], unit="s", description="The p95 each limiter window judged, against the target it judged it by."),
]

OVERVIEW = dashboard("weir-overview", "weir / overview",
                     "Throughput, backlog, latency, failures, limiter and Redis for one queue.", [
    panel("Throughput in / out", [
        (event, queue_rate(event)) for event in ("enqueued", "fetched", "acked")
    ], unit="ops", description="The queue's own counters in Redis, which every producer (any language, "
                               "the CLI) and consumer bumps; each consumer samples them, each "
                               "partition is counted once."),
    panel("Backlog", [
        ("ready {{priority}}", f"sum by (priority) (max by (priority, partition) (weir_queue_ready_jobs{Q}))"),
        ("delayed", depth("weir_queue_delayed_jobs")),
        ("leased: running or waiting (weir_queue_in_flight_jobs)", depth("weir_queue_in_flight_jobs")),
        ("deferred (uncharged, not done)", depth("weir_queue_deferred_jobs")),
    ], description="Every consumer samples the queue's depths; each partition of a partitioned queue "
                   "is counted once and the partitions added up."),
    panel("Oldest ready job", [("age", f"max(weir_queue_oldest_ready_age_seconds{Q})")], unit="s"),
    panel("Partitions: ready jobs and acks per partition", [
        ("ready, partition {{partition}}",
         f"sum by (partition) (max by (partition, priority) (weir_queue_ready_jobs{Q}))"),
        ("acked/s, partition {{partition}}", rate("weir_jobs_acked_total", by="partition")),
    ], description="For a partitioned queue (weir queue create --partitions): how evenly the work "
                   "spreads. One line each for an unpartitioned queue."),
    panel("Handler duration", quantiles("weir_job_duration_seconds"), unit="s"),
    panel("End-to-end latency (enqueue to outcome)", quantiles("weir_job_end_to_end_seconds"), unit="s"),
    panel("Failures", [
        ("retried", rate("weir_jobs_retried_total")),
        ("deferred {{reason}}", rate("weir_jobs_deferred_total", by="reason")),
        ("dead-lettered", rate("weir_jobs_dead_lettered_total")),
        ("reclaimed", rate("weir_jobs_reclaimed_total")),
        ("leases lost", rate("weir_leases_lost_total")),
    ], unit="ops"),
    panel("Dead-letter queue", [
        ("dead", depth("weir_queue_dead_jobs")),
        ("trimmed by the cap", depth("weir_dead_trimmed_total")),
    ]),
    *LIMIT_PANELS,
    panel("Redis round trip p99 by script", [
        ("{{script}}", f'histogram_quantile(0.99, sum by (le, script) '
                       f'(rate(weir_redis_script_duration_seconds_bucket{Q}[$__rate_interval])))'),
    ], unit="s"),
    panel("Redis calls and errors", [
        ("{{script}} calls", f"sum by (script) (rate(weir_redis_script_duration_seconds_count{Q}[$__rate_interval]))"),
        ("errors", rate("weir_redis_errors_total")),
        ("reconnects", rate("weir_redis_reconnects_total")),
    ], unit="ops"),
])

LIMITER = dashboard("weir-limiter", "weir / limiter tuning",
                    "What the concurrency limiter sees and decides, to tune min, max, target and rate.", [
    *LIMIT_PANELS,
    panel("Handler duration", quantiles("weir_job_duration_seconds"), unit="s"),
    panel("Limiter decisions", [
        ("{{decision}}", f"sum by (decision) (rate(weir_limiter_decisions_total{Q}[$__rate_interval]))"),
    ], unit="ops", description="Per window: decrease on latency or errors, increase (probe), hold, baseline."),
    panel("Limiter window error ratio", [
        ("errors", f"max(weir_limiter_window_error_ratio{Q})"),
    ], unit="percentunit"),
    panel("Batch sizes", [
        ("fetch", f"sum(rate(weir_fetch_batch_jobs_sum{Q}[$__rate_interval])) / "
                  f"sum(rate(weir_fetch_batch_jobs_count{Q}[$__rate_interval]))"),
        ("ack", f"sum(rate(weir_ack_batch_jobs_sum{Q}[$__rate_interval])) / "
                f"sum(rate(weir_ack_batch_jobs_count{Q}[$__rate_interval]))"),
    ]),
    panel("Buffered jobs (fetched, not started)", [
        ("buffered", f"sum(weir_channel_sent_jobs_total{Q}) - sum(weir_channel_received_jobs_total{Q})"),
    ]),
    panel("Throughput vs failures", [
        ("acked", rate("weir_jobs_acked_total")),
        ("retried", rate("weir_jobs_retried_total")),
    ], unit="ops"),
    panel("Global permits (fleet-wide limits)", [
        ("granted", rate("weir_global_permits_granted_total")),
        ("denied by {{limit}}", rate("weir_global_permits_denied_total", by="limit")),
    ], unit="ops", description="Jobs the queue's global rate and concurrency (weir limits set --global-*) "
                               "granted to this fleet's fetches, and the jobs asked for that they did not grant. "
                               "Zero while no global limit is set."),
    panel("Keys held back the most (per-key limits)", [
        ("{{key}}", f"sum by (key) (rate(weir_key_throttled_jobs_total{Q}[$__rate_interval]))"),
    ], unit="ops", description="Jobs held back by their key's limits (weir limits set --per-key-*), "
                               "for the 10 keys held back the most: a key that hits its limit waits alone."),
])

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    for name, d in [("weir-overview.json", OVERVIEW), ("weir-limiter.json", LIMITER)]:
        with open(os.path.join(here, name), "w") as f:
            json.dump(d, f, indent=2)
            f.write("\n")
        print(f"wrote dashboards/{name}")
