"""The workflow's rules in the gate: guard metrics reject a candidate worse beyond the noise,
and every trial compared must have run on one node."""

from __future__ import annotations

from dataclasses import replace

from contracts.artifacts.decision import Decision
from contracts.artifacts.trials import Trial
from contracts.campaign import GateSpec
from services.gate import decide
from tests.unit.gate.test_decide import SPEC, arm, level


def scaled(trials: list[Trial], metric: str, factor: float) -> list[Trial]:
    """The trials with one summary figure scaled: a candidate that pays for its TPOT win elsewhere."""
    return [replace(t, summary={**t.summary, metric: t.summary[metric] * factor}) for t in trials]


def guarded(*guards: str) -> GateSpec:
    return GateSpec(objective="tpot", acceptance_floor=0.5, guards=list(guards))


# --- guards ---------------------------------------------------------------------------


def test_a_candidate_worse_on_a_guard_is_rejected_although_its_objective_wins() -> None:
    base, cand = arm(1, "standing"), scaled(arm(2, "c", factor=0.7), "output_throughput", 0.6)
    assert decide(base, {"c": cand}, SPEC).decision == "promote"  # without the guard it wins
    d = decide(base, {"c": cand}, guarded("output_throughput"))
    lvl = level(d, "c")
    assert d.decision == "reject" and lvl.outcome == "reject"
    assert lvl.objective is not None and lvl.objective.verdict == "better"
    [guard] = lvl.guards
    assert guard.guard == "output_throughput" and guard.passed is False
    assert guard.comparison.verdict == "worse" and guard.comparison.delta_pct < 0
    assert any(r.startswith("guard output_throughput is worse beyond the noise, so the candidate is rejected")
               for r in lvl.reasons)
    # The same comparison as the reported metric: one statistics path.
    reported = next(m for m in lvl.metrics if m.metric == "output_throughput")
    assert guard.comparison == reported


def test_a_guard_that_holds_lets_the_candidate_win_and_is_recorded() -> None:
    d = decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7)}, guarded("output_throughput", "ttft:p99"))
    lvl = level(d, "c")
    assert d.decision == "promote"
    assert [(g.guard, g.comparison.metric, g.passed) for g in lvl.guards] == [
        ("output_throughput", "output_throughput", True), ("ttft:p99", "ttft:p99", True)]
    # ttft:p99 is no reported metric: the guard has its own comparison, computed the same way.
    assert "ttft:p99" not in {m.metric for m in lvl.metrics}
    assert lvl.guards[1].comparison.interval is not None
    assert any(r.startswith("guard ttft:p99 not worse: ttft:p99:") for r in lvl.reasons)
    assert Decision.model_validate_json(d.model_dump_json()) == d


def test_a_latency_guard_worse_beyond_the_noise_rejects() -> None:
    base, cand = arm(1, "standing"), scaled(arm(2, "c", factor=0.7), "p99_ttft_ms", 2.0)
    assert decide(base, {"c": cand}, SPEC).decision == "promote"
    d = decide(base, {"c": cand}, guarded("ttft:p99"))
    assert d.decision == "reject" and level(d, "c").guards[0].passed is False


def test_a_guard_that_cannot_be_compared_leaves_the_level_inconclusive() -> None:
    # The standing cell drafts nothing: it has no acceptance figure to compare with.
    d = decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7)}, guarded("acceptance_rate"))
    lvl = level(d, "c")
    assert d.decision == "inconclusive" and lvl.guards[0].passed is None
    assert any(r.startswith("guard acceptance_rate could not be compared") and "missing in 3 trial file(s)" in r
               for r in lvl.reasons)


def test_a_worse_objective_still_rejects_whatever_the_guards() -> None:
    d = decide(arm(1, "standing"), {"c": arm(2, "c", factor=1.3)}, guarded("acceptance_rate"))
    assert d.decision == "reject"


def test_a_guard_worse_beyond_the_noise_rejects_even_when_the_objective_is_within_noise() -> None:
    base, cand = arm(1, "standing"), scaled(arm(2, "c", factor=1.0), "output_throughput", 0.5)
    assert decide(base, {"c": cand}, SPEC).decision == "inconclusive"
    assert decide(base, {"c": cand}, guarded("output_throughput")).decision == "reject"


# --- the node -------------------------------------------------------------------------


def test_trials_on_one_node_are_compared() -> None:
    d = decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7)}, SPEC)
    assert d.decision == "promote" and "node" not in d.unchecked_identity_fields


def test_arms_on_different_nodes_are_inconclusive_naming_the_nodes() -> None:
    d = decide(arm(1, "standing", node="gpu-a"), {"c": arm(2, "c", factor=0.7, node="gpu-b")}, SPEC)
    lvl = level(d, "c")
    assert d.decision == "inconclusive" and lvl.outcome == "inconclusive"
    [why] = [r for r in lvl.reasons if "did not all run on one node" in r]
    assert "node gpu-a: baseline trial 0, baseline trial 1, baseline trial 2" in why
    assert "node gpu-b: candidate trial 0, candidate trial 1, candidate trial 2" in why


def test_one_trial_on_another_node_is_inconclusive() -> None:
    cand = arm(2, "c", factor=0.7)
    moved = [replace(t, identity=t.identity.model_copy(update={"node": "gpu-x"})) if t.identity.trial == 1 else t  # type: ignore[union-attr]  # arm() gives each an identity
             for t in cand]
    d = decide(arm(1, "standing"), {"c": moved}, SPEC)
    assert d.decision == "inconclusive"
    assert any("node gpu-x: candidate trial 1" in r for r in level(d, "c").reasons)


def test_files_written_before_the_node_entered_the_identity_leave_it_unchecked() -> None:
    d = decide(arm(1, "standing", node=None), {"c": arm(2, "c", factor=0.7, node=None)}, SPEC)
    assert d.decision == "promote" and d.unchecked_identity_fields == ["node"]
    assert any("identity not checked" in r and "node" in r for r in d.reasons)
    # Known on one arm, unknown on the other: the same node cannot be shown.
    mixed = decide(arm(1, "standing", node=None), {"c": arm(2, "c", factor=0.7)}, SPEC)
    assert mixed.decision == "inconclusive"
    assert any("unknown node: baseline trial 0" in r for r in level(mixed, "c").reasons)
