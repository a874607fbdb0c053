"""The gate's objective: which metric and statistic decide, and which others are reported.

The metrics themselves (names, directions, units, one figure per trial) are
`contracts.results`, shared with the publisher so that the report shows the
gate's own figures.
"""

from __future__ import annotations

from contracts.campaign import OBJECTIVE_RE
from contracts.trials import DEFAULT_STATISTIC, DIRECTIONS, LATENCY_METRICS, MetricKey
from services.gate.errors import GateSpecError


def parse_objective(text: str | None) -> tuple[MetricKey, str | None]:
    """`tpot:p99` -> MetricKey; the second value is a note when a given statistic is ignored."""
    if not text:
        raise GateSpecError("the gate needs an objective, e.g. --objective tpot or tpot:p99")
    if not OBJECTIVE_RE.match(text):
        raise GateSpecError(
            f"objective {text!r} is not METRIC[:STAT] with METRIC one of {', '.join(DIRECTIONS)} "
            "and STAT mean, median or pNN"
        )
    metric, _, stat = text.partition(":")
    if metric not in LATENCY_METRICS:
        note = f"statistic {stat!r} ignored: {metric} is one figure per trial" if stat else None
        return MetricKey(metric, None), note
    return MetricKey(metric, _normal_statistic(stat or DEFAULT_STATISTIC)), None


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
