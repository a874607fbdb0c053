"""The cost of a sequential campaign as `specdec status` states it: the expected trials per arm for the
declared minimum effect, per level, and the latest look.

Read from the run's bundle as plain JSON, so no statistics library loads here: the bench plan's figure
before round 1, the pilot's from round 1 on (docs/gate.md#sequential-rounds defines both).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from contracts.envelope import Strict
from contracts.layout import BENCH_PLAN
from contracts.layout import BENCH_ROUNDS_DIR as LOOKS_DIR
from services.shared.formatting import concurrency


class LevelCost(Strict):
    """The expected trials per arm at one level (of one candidate once the pilot has run)."""

    concurrency: int = Field(description="The concurrency level.")
    candidate: str | None = Field(description="The candidate cell (the pilot's figure); null for the plan's "
                                  "per-level figure from earlier runs.")
    source: Literal["pilot", "earlier_runs", "none"] = Field(
        description="pilot: round 1 of this run; earlier_runs: earlier runs of the same target and hardware "
        "(the plan's rounds.noise); none: no noise known yet (round 1 will tell).")
    runs: list[str] = Field(description="The earlier runs the figure comes from (source earlier_runs).")
    cv_pct: float | None = Field(
        description="The objective's per-trial spread (sd of its logs, %) the figure rests on."
    )
    expected_trials_per_arm: int | None = Field(
        description="Trials per arm expected to settle the minimum effect at that spread; null when unknown or "
        "not expected by the cap.")
    verdict: str | None = Field(description="The level's verdict at the latest look (better, worse, no_effect, "
                                "undecided); null before round 1.")
    open: bool | None = Field(description="Whether the latest look left the level open (more rounds); null before "
                              "round 1.")


class RoundsCost(Strict):
    """A sequential campaign's trial range, where its rounds stand, and the expected trials per arm."""

    min_trials: int = Field(description="Trials per arm before the first look (round 1, the pilot).")
    max_trials: int = Field(description="The approved cap on trials per arm and level.")
    min_effect_pct: float = Field(description="The gate's declared minimum effect, %.")
    trials_per_arm: int | None = Field(description="Trials per arm at the latest look; null before round 1.")
    stopped: str | None = Field(description="Why the rounds stopped at the latest look (decided, cap); null while "
                                "they go on or before round 1.")
    levels: list[LevelCost] = Field(description="Per level: the expected trials per arm and what they come from.")


def rounds_cost(bundle: Any, run_id: str) -> RoundsCost | None:
    """The run's RoundsCost; None for a run without a bench plan or without sequential rounds."""
    rounds = _read(bundle, run_id, BENCH_PLAN, "rounds")
    if not isinstance(rounds, dict):
        return None
    looks = _looks(bundle, run_id)
    pilot, latest = (looks[0], looks[-1]) if looks else (None, None)
    now = {(lvl.get("candidate"), lvl.get("concurrency")): lvl for lvl in (latest or {}).get("levels", [])}
    if pilot is not None:
        levels = [LevelCost(concurrency=lvl["concurrency"], candidate=lvl.get("candidate"), source="pilot", runs=[],
                            cv_pct=lvl.get("cv_pct"), expected_trials_per_arm=lvl.get("expected_trials_per_arm"),
                            verdict=now.get(key, {}).get("verdict"), open=now.get(key, {}).get("open"))
                  for lvl in pilot.get("levels", []) for key in [(lvl.get("candidate"), lvl.get("concurrency"))]]
    else:
        levels = [LevelCost(concurrency=row["concurrency"], candidate=None,
                            source="earlier_runs" if row.get("trials") else "none", runs=list(row.get("runs", [])),
                            cv_pct=row.get("cv_pct"), expected_trials_per_arm=row.get("expected_trials_per_arm"),
                            verdict=None, open=None)
                  for row in rounds.get("noise", [])]
    return RoundsCost(min_trials=rounds["min_trials"], max_trials=rounds["max_trials"],
                      min_effect_pct=rounds["min_effect_pct"],
                      trials_per_arm=latest["trials_per_arm"] if latest else None,
                      stopped=latest.get("stopped") if latest else None, levels=levels)


def describe(cost: RoundsCost) -> list[str]:
    """status's lines for it."""
    where = (f"{cost.trials_per_arm} trial(s) per arm so far" + (f", stopped ({cost.stopped})" if cost.stopped else "")
             if cost.trials_per_arm is not None else "round 1 (the pilot) not yet looked at")
    lines = [f"  rounds    {cost.min_trials}..{cost.max_trials} trials per arm, minimum effect "
             f"{cost.min_effect_pct:g} %: {where}"]
    for lvl in cost.levels:
        where = f"c={concurrency(lvl.concurrency)}"
        who = f"{lvl.candidate} at {where}" if lvl.candidate else where
        if lvl.source == "none":
            lines.append(f"            {who}: expected trials unknown (no earlier runs of this target and hardware; "
                         "round 1 will tell)")
            continue
        expected = ("not expected by the cap" if lvl.expected_trials_per_arm is None
                    else f"about {lvl.expected_trials_per_arm} trials per arm expected")
        origin = "round 1" if lvl.source == "pilot" else f"{len(lvl.runs)} earlier run(s)"
        state = f"; now {lvl.verdict}{' (open)' if lvl.open else ''}" if lvl.verdict else ""
        spread = "" if lvl.cv_pct is None else f"per-trial spread {lvl.cv_pct:g} % "
        lines.append(f"            {who}: {expected} ({spread}from {origin}){state}")
    return lines


def _looks(bundle: Any, run_id: str) -> list[dict[str, Any]]:
    folder = bundle.run_dir(run_id) / LOOKS_DIR
    names = sorted((p.name for p in folder.glob("look-*.json")), key=lambda n: int(n[5:-5]) if n[5:-5].isdigit() else 0)
    looks = [_read(bundle, run_id, f"{LOOKS_DIR}/{name}") for name in names]
    return [look for look in looks if isinstance(look, dict) and isinstance(look.get("trials_per_arm"), int)]


def _read(bundle: Any, run_id: str, relpath: str, key: str | None = None) -> Any:
    """A stored JSON document (or one key of it); None when absent or unreadable (status never fails on it)."""
    from services.runtime.bundle.bundle import BundleError

    try:
        if not bundle.exists(run_id):
            return None
        doc = bundle.read_json(run_id, relpath)
    except (BundleError, OSError, ValueError):  # absent or untrusted: the figure is left out, status goes on
        return None
    return doc.get(key) if key is not None and isinstance(doc, dict) else doc
