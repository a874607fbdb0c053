"""The gate's metrics: which metric and statistic decide, which guard, which others are reported.

The metrics themselves (names, directions, units, one figure per trial) are
`contracts.artifacts.trials`, shared with the publisher so that the report shows the
gate's own figures. The objective is a latency (the workflow promotes only a
candidate that improves the declared latency objective); throughput and the
acceptance figures can be guards (GateSpec.guards): reported, and a candidate
worse beyond the noise on one is rejected.
"""

from __future__ import annotations

from contracts.artifacts.trials import DEFAULT_STATISTIC, DIRECTIONS, LATENCY_METRICS, MetricKey
from contracts.campaign import OBJECTIVE_RE
from services.gate.errors import GateSpecError


def parse_objective(text: str | None) -> MetricKey:
    """`tpot:p99` -> MetricKey; refuses a metric that is not a latency.

    GateSpec refuses such an objective already; this holds for a spec built
    without validation (model_construct) or read from an older file."""
    if not text:
        raise GateSpecError("the gate needs an objective, e.g. --objective tpot or tpot:p99")
    key = parse_metric(text, what="objective")
    if key.metric not in LATENCY_METRICS:
        raise GateSpecError(
            f"objective {text!r} is not a latency metric: the gate promotes only on {', '.join(LATENCY_METRICS)} "
            f"(optionally :median, :mean or :pNN); {key.metric} can be a guard (gate.guards, specdec gate --guard)"
        )
    return key


def parse_guards(texts: list[str]) -> list[MetricKey]:
    """The guard metrics, in the spec's order (GateSpec refuses repeats and misplaced statistics)."""
    return [parse_metric(text, what="guard") for text in texts]


def parse_metric(text: str, *, what: str) -> MetricKey:
    """`METRIC[:STAT]` -> MetricKey, the statistic normalised to vLLM's key names."""
    if not OBJECTIVE_RE.match(text):
        raise GateSpecError(
            f"{what} {text!r} is not METRIC[:STAT] with METRIC one of {', '.join(DIRECTIONS)} "
            "and STAT mean, median or pNN"
        )
    metric, _, stat = text.partition(":")
    if metric not in LATENCY_METRICS:
        if stat:
            raise GateSpecError(f"{what} {text!r}: {metric} is one figure per trial, so a statistic does not apply")
        return MetricKey(metric, None)
    return MetricKey(metric, _normal_statistic(stat or DEFAULT_STATISTIC))


def reported_metrics(objective: MetricKey) -> list[MetricKey]:
    """The objective first, then every other metric at its default statistic."""
    keys = [objective]
    for metric in DIRECTIONS:
        key = MetricKey(metric, DEFAULT_STATISTIC if metric in LATENCY_METRICS else None)
        if key != objective:
            keys.append(key)
    return keys


def _normal_statistic(stat: str) -> str:
    # vLLM names percentiles p99, p99.9 (never p99.0): match its key names.
    if stat.startswith("p"):
        p = float(stat[1:])
        if not 0 < p < 100:
            raise GateSpecError(f"percentile {stat!r} must lie strictly between p0 and p100")
        return "p" + (str(int(p)) if p == int(p) else str(p))
    return stat
