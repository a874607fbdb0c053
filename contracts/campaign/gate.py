"""The gate's spec: the latency objective, guards, floors, trial counts and the minimum effect."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer, model_validator

from contracts.envelope import Strict

# The gate's noise estimate (Welch interval, A/A bound over an arm's trials) needs two trials per arm.
GATE_MIN_TRIALS = 2
# The workflow asks for at least three matched trials per arm; fewer only in an exploratory matrix.
GATE_MIN_TRIALS_CAMPAIGN = 3
# The smallest relative change the gate counts as one, in % (docs/gate.md "Minimum effect": the known-truth
# simulation in tests/perf/bench_sequential.py meets its targets at 1 % and 1.5 %, misses power at 2 %).
DEFAULT_MIN_EFFECT_PCT = 1.0
# gate.max_trials: the most trials per arm a campaign's rounds may ask for.
MAX_TRIALS_CAP = 100
OBJECTIVE_RE = re.compile(
    r"^(ttft|tpot|itl|e2el|output_throughput|acceptance_rate|acceptance_length)(:(mean|median|p[0-9]{1,2}(\.[0-9]+)?))?$"
)
# The gate decides on a latency objective only (contracts/artifacts/trials.py LATENCY_METRICS, kept in step by a
# unit test); throughput and acceptance are guard metrics. A latency takes a statistic over a trial's
# requests; the other metrics are one figure per trial.
LATENCY_OBJECTIVES: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")


class GateSpec(Strict):
    """What a candidate must show to be promoted."""

    objective: str | None = Field(
        default=None,
        description="Latency objective the candidate must improve: ttft, tpot, itl or e2el, optionally :median "
        "(default), :mean or :pNN, e.g. tpot, tpot:p99. Required.",
    )
    acceptance_floor: float | None = Field(default=None, ge=0, le=1, description="Minimum acceptance rate.")
    acceptance_length_floor: float | None = Field(default=None, ge=1, description="Minimum mean acceptance length.")
    accuracy_floor: float | None = Field(default=None, ge=0, le=1, description="Minimum eval accuracy or agreement.")
    min_trials: int = Field(
        default=3, ge=1,
        description=f"Trials per arm below which the gate is inconclusive; at least {GATE_MIN_TRIALS} "
        "(the noise estimate needs two).",
    )
    guards: list[str] = Field(
        default_factory=list,
        description="Metrics a candidate must not worsen, METRIC[:STAT] each (output_throughput, acceptance_rate, "
        "acceptance_length, or a latency such as ttft:p99): worse beyond the minimum effect on any of them rejects it.",
    )
    min_effect_pct: float = Field(
        default=DEFAULT_MIN_EFFECT_PCT, ge=0, lt=100,
        description="Smallest change that counts, in % of the baseline: the objective is better only when its whole "
        "interval lies beyond this improvement, worse (and a guard worse) only when beyond this deterioration.",
    )
    server_bias_pct: float = Field(
        default=0.0, ge=0, lt=100,
        description="Systematic difference between two servers of one config, in %, as measured by A/A campaigns "
        "on this target and hardware: widens every interval by this much on both sides. 0 (the default) when "
        "none was measured.",
    )
    max_trials: int | None = Field(
        default=None, ge=GATE_MIN_TRIALS, le=MAX_TRIALS_CAP,
        description="Sequential rounds: the most trials per arm and concurrency level the bench may run (a hard "
        "ceiling on server time, in the approved plan). The bench runs min_trials, then one more trial per arm "
        "and level each round until every level is decided or this cap; every cell must then be warm-interleaved "
        "and run min_trials as its `trials`. None (the default): each cell runs its fixed `trials`.",
    )

    @model_validator(mode="after")
    def _check_max_trials(self) -> GateSpec:
        if self.max_trials is not None and self.max_trials < self.min_trials:
            raise ValueError(
                f"gate.max_trials {self.max_trials} is below gate.min_trials {self.min_trials}: the cap must allow "
                "the minimum trials per arm; raise gate.max_trials or remove it"
            )
        return self

    @model_serializer(mode="wrap")
    def _without_absent_max_trials(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A campaign without a cap stores (and a decision echoes) its gate spec byte for byte as before the field.
        data: dict[str, Any] = handler(self)
        if data.get("max_trials") is None:
            data.pop("max_trials", None)
        return data

    @field_validator("min_trials")
    @classmethod
    def _check_min_trials(cls, value: int) -> int:
        if value < GATE_MIN_TRIALS:
            raise ValueError(
                f"gate.min_trials {value} cannot be honoured: the gate tells a difference from noise with each arm's "
                f"trial-to-trial spread, which needs at least {GATE_MIN_TRIALS} trials per arm; set gate.min_trials "
                f"to {GATE_MIN_TRIALS} or more"
            )
        return value

    @model_validator(mode="after")
    def _check_objective(self) -> GateSpec:
        problems = []
        if self.objective is not None:
            problems += _metric_problems("gate.objective", self.objective)
            metric = self.objective.partition(":")[0]
            if not problems and metric not in LATENCY_OBJECTIVES:
                floor = " (or gate.acceptance_floor / gate.acceptance_length_floor for a minimum)" \
                    if metric.startswith("acceptance") else ""
                problems.append(
                    f"gate.objective {self.objective!r} is not a latency metric: the gate promotes only a candidate "
                    f"that improves a latency objective (ttft, tpot, itl or e2el, optionally :median, :mean or :pNN); "
                    f"{metric} can be a guard: list it under gate.guards{floor}, so a candidate worse on it is rejected"
                )
        seen = {_metric_key(self.objective)} if self.objective is not None and not problems else set()
        for guard in self.guards:
            found = _metric_problems(f"gate.guards item {guard!r}", guard, guard=True)
            if not found and _metric_key(guard) in seen:
                found = [f"gate.guards item {guard!r} repeats the objective or another guard: list each metric once"]
            seen.add(_metric_key(guard))
            problems += found
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _metric_problems(where: str, text: str, *, guard: bool = False) -> list[str]:
    """Why `text` is not a usable METRIC[:STAT]; empty when it is."""
    match = OBJECTIVE_RE.match(text)
    if not match:
        return [f"{where} is not METRIC[:STAT] with METRIC one of ttft, tpot, itl, e2el, output_throughput, "
                "acceptance_rate, acceptance_length and STAT mean, median or pNN"]
    metric, _, stat = text.partition(":")
    if stat.startswith("p") and not 0 < float(stat[1:]) < 100:
        return [f"{where}: percentile {stat!r} must lie strictly between p0 and p100"]
    if guard and stat and metric not in LATENCY_OBJECTIVES:
        return [f"{where}: {metric} is one figure per trial, so a statistic does not apply: write {metric!r}"]
    return []


def _metric_key(text: str | None) -> tuple[str, str | None]:
    """(metric, statistic) with the statistic normalised: `ttft` is `ttft:median`, `tpot:p99.0` is `tpot:p99`."""
    metric, _, stat = (text or "").partition(":")
    if metric not in LATENCY_OBJECTIVES:
        return metric, None
    stat = stat or "median"
    if stat.startswith("p"):
        p = float(stat[1:])
        stat = "p" + (str(int(p)) if p == int(p) else str(p))
    return metric, stat
