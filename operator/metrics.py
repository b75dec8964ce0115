"""The operator's Prometheus metrics: one prefix (``maya_``), base units, bounded labels.

Labels are bounded: ``phase``, ``result``, ``kind`` and ``gpu`` take a few
values each; per-plan gauges carry ``namespace`` and ``plan`` and are removed
with their plan.  The chart's Grafana dashboard queries only these names
(a test checks it).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

PLANS = Gauge("maya_plans", "TrainingPlans by phase.", ["phase"], registry=REGISTRY)
EMULATIONS = Counter("maya_emulations_total", "Emulation pods by result: succeeded, failed, reused.", ["result"],
                     registry=REGISTRY)
EMULATION_SECONDS = Histogram("maya_emulation_duration_seconds", "Wall time of one emulation pod.",
                              buckets=(15, 30, 60, 120, 300, 600, 1200, 1800, 3600), registry=REGISTRY)
PLANNING_SECONDS = Histogram("maya_planning_duration_seconds", "From a plan's generation to its recommendation.",
                             buckets=(30, 60, 120, 300, 600, 1200, 1800, 3600, 7200), registry=REGISTRY)
ADMISSIONS = Counter("maya_admission_requests_total",
                     "Admission requests by job kind and result: patched, unchanged, allowed, rejected, error.",
                     ["kind", "result"], registry=REGISTRY)
RECOMMENDED_GPUS = Gauge("maya_plan_recommended_gpus", "GPUs of a plan's recommendation.",
                         ["namespace", "plan", "gpu"], registry=REGISTRY)
STEP_SECONDS = Gauge("maya_plan_step_seconds", "Predicted seconds per optimizer step of a plan's recommendation.",
                     ["namespace", "plan"], registry=REGISTRY)
HOURLY_COST = Gauge("maya_plan_hourly_cost_dollars", "USD per hour of the recommended shape's GPUs.",
                    ["namespace", "plan", "gpu"], registry=REGISTRY)
HOURLY_SAVING = Gauge("maya_plan_hourly_saving_dollars",
                      "USD per hour saved by the recommended shape against the GPUs a job asked for "
                      "(set when the admission webhook resizes a job).", ["namespace", "plan"], registry=REGISTRY)

NAMES = ("maya_plans", "maya_emulations_total", "maya_emulation_duration_seconds", "maya_planning_duration_seconds",
         "maya_admission_requests_total", "maya_plan_recommended_gpus", "maya_plan_step_seconds",
         "maya_plan_hourly_cost_dollars", "maya_plan_hourly_saving_dollars")


def forget_plan(namespace: str, plan: str) -> None:
    """Drop a deleted plan's series (bounded cardinality)."""
    for gauge in (RECOMMENDED_GPUS, HOURLY_COST):
        for labels in list(gauge._metrics):  # noqa: SLF001 - prometheus_client has no public listing
            if labels[:2] == (namespace, plan):
                gauge.remove(*labels)
    for gauge in (STEP_SECONDS, HOURLY_SAVING):
        if (namespace, plan) in gauge._metrics:  # noqa: SLF001
            gauge.remove(namespace, plan)
