"""The metrics the gate compares, their directions, and one value per trial.

A metric is read as one number per trial: that is the unit the statistics
treat as independent (stats.py). Latencies (ttft, tpot, itl, e2el) take a
statistic over the trial's requests (median by default, mean or pNN); output
throughput and the acceptance figures are already one number per trial, so a
statistic does not apply to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from contracts.campaign import OBJECTIVE_RE
from services.gate.errors import GateSpecError
from services.gate.results import LATENCY_METRICS, Trial

Direction = Literal["higher_is_better", "lower_is_better"]

DIRECTIONS: dict[str, Direction] = {
    "ttft": "lower_is_better",
    "tpot": "lower_is_better",
    "itl": "lower_is_better",
    "e2el": "lower_is_better",
    "output_throughput": "higher_is_better",
    "acceptance_rate": "higher_is_better",
    "acceptance_length": "higher_is_better",
}
UNITS: dict[str, str] = {
    "ttft": "ms",
    "tpot": "ms",
    "itl": "ms",
    "e2el": "ms",
    "output_throughput": "tok/s",
    "acceptance_rate": "accepted/draft tokens",
    "acceptance_length": "tokens per step",
}
DEFAULT_STATISTIC = "median"


@dataclass(frozen=True)
class MetricKey:
    """A metric and, for latencies, the statistic over a trial's requests."""

    metric: str
    statistic: str | None  # median, mean, p99, p99.9; None where it does not apply

    @property
    def name(self) -> str:
        return f"{self.metric}:{self.statistic}" if self.statistic else self.metric

    @property
    def direction(self) -> Direction:
        return DIRECTIONS[self.metric]

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "higher_is_better"

    @property
    def unit(self) -> str:
        return UNITS[self.metric]


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


def trial_value(trial: Trial, key: MetricKey) -> float | None:
    """The trial's figure for `key`; None when the file does not carry it."""
    if key.metric == "acceptance_rate":
        return trial.spec_decode.acceptance_rate if trial.spec_decode else None
    if key.metric == "acceptance_length":
        return trial.spec_decode.mean_acceptance_length if trial.spec_decode else None
    if key.metric == "output_throughput":
        return trial.summary.get("output_throughput")
    # vLLM's own summary first: it was computed on the same requests by the same code.
    value = trial.summary.get(f"{key.statistic}_{key.metric}_ms")
    if value is not None:
        return value
    if trial.detail is None:
        return None
    values = trial.detail.values(key.metric)
    if values.size == 0:
        return None
    if key.statistic == "mean":
        return float(np.mean(values))
    if key.statistic == "median":
        return float(np.median(values))
    return float(np.percentile(values, float(key.statistic[1:])))  # type: ignore[index]


def _normal_statistic(stat: str) -> str:
    # vLLM names percentiles p99, p99.9 (never p99.0): match its key names.
    if stat.startswith("p"):
        p = float(stat[1:])
        if not 0 < p < 100:
            raise GateSpecError(f"percentile {stat!r} must lie strictly between p0 and p100")
        return "p" + (str(int(p)) if p == int(p) else str(p))
    return stat
