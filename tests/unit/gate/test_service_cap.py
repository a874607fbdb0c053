"""The gate step decides with the campaign's cap (gate.max_trials): the repeated interval of the
look where the bench's rounds stopped, `continue` for an undecided level under the cap (the step
fails NotFinal: no DECISION.json, no gate.decided), a failed cell's levels stopped as
`bench_failed`, never `continue`; and nothing but gate.decided starts the report. Runs `gate_run`
on a real bundle folder."""

from __future__ import annotations

import typing
from pathlib import Path

import numpy as np
import orjson
import pytest
import yaml

from contracts import layout
from contracts.campaign import Campaign, SpeculativeConfig
from contracts.catalogue import PUBLISHER, consumed_by
from contracts.events import BenchCompleted, GateDecided, GateRequested
from services.gate.app import gate_run
from services.gate.simulate import NoiseModel, identity, spec_counters, trial_result
from services.runtime.bundle.bundle import BundleError, BundleStore
from services.runtime.errors import StepFailed

ROOT = Path(__file__).resolve().parents[3]
RUN = "toy-20261130-050505-abcdef"
SPEC = SpeculativeConfig(method="ngram", num_speculative_tokens=3)
NOISY = NoiseModel(trial_cv=0.10, request_cv=0.05)
QUIET = NoiseModel(trial_cv=0.01, request_cv=0.05)
DEFAULT_NOISE = NoiseModel()


def seeded(tmp_path: Path, *, max_trials: int | None, factor: float, trials: int = 3,
           noise: NoiseModel = DEFAULT_NOISE) -> tuple[BundleStore, list]:
    bundle = BundleStore(tmp_path / "bundles")
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    if max_trials is not None:
        data["gate"]["max_trials"] = max_trials
    bundle.write_json(RUN, layout.CAMPAIGN, Campaign.model_validate(data))
    rng = np.random.default_rng(11)
    refs = []
    for trial in range(trials):
        arms = {
            "standing": trial_result(rng, noise=noise, ident=identity("standing", concurrency=1, trial=trial,
                                                                      trial_count=trials)),
            "ngram-k3": trial_result(rng, factor=factor, noise=noise, counters=spec_counters(0.6, 3), ident=identity(
                "ngram-k3", concurrency=1, trial=trial, trial_count=trials, speculative=SPEC,
                baseline_cell_id="standing")),
        }
        for cell, result in arms.items():
            refs.append(bundle.write_bytes(RUN, f"bench/{cell}/trial-{trial}/result-c1.json", orjson.dumps(result)))
    return bundle, refs


def stored(bundle: BundleStore) -> dict:
    return orjson.loads(bundle.read_bytes(RUN, layout.DECISION))


def test_the_step_decides_with_the_campaigns_cap(tmp_path: Path) -> None:
    bundle, refs = seeded(tmp_path, max_trials=15, factor=0.7, noise=QUIET)
    decided = gate_run(bundle, BenchCompleted(run_id=RUN, producer="test", draft=False, results=refs), "gate/test")
    decision = stored(bundle)
    level = decision["candidates"][0]["levels"][0]
    assert decided.decision == decision["decision"] == "promote"
    assert decision["thresholds"]["max_trials"] == 15 and "Hwang-Shih-DeCani" in decision["thresholds"]["spending"]
    assert (level["stopped"], level["trials_used"], level["trials_expected_more"]) == ("decided", 3, 0)
    # The repeated interval at the first of 13 looks is wider than the one-look interval on the same trials.
    fixed_bundle, fixed_refs = seeded(tmp_path / "fixed", max_trials=None, factor=0.7, noise=QUIET)
    gate_run(fixed_bundle, BenchCompleted(run_id=RUN, producer="test", draft=False, results=fixed_refs), "gate/test")
    fixed = stored(fixed_bundle)["candidates"][0]["levels"][0]["objective"]["interval"]
    rci = level["objective"]["interval"]
    assert rci["high_pct"] - rci["low_pct"] > fixed["high_pct"] - fixed["low_pct"]


def test_an_undecided_level_under_the_cap_continues_and_nothing_is_reported(tmp_path: Path) -> None:
    bundle, refs = seeded(tmp_path, max_trials=15, factor=1.0, noise=NOISY)
    for event in (BenchCompleted(run_id=RUN, producer="test", draft=False, results=refs),
                  GateRequested(run_id=RUN, producer="test", requested_by="test")):
        with pytest.raises(StepFailed) as failed:
            gate_run(bundle, event, "gate/test")
        assert failed.value.error_type == "NotFinal"
        assert "continue: more trials (at most 15 per arm) could still change the outcome at ngram-k3 at " \
               "concurrency 1" in str(failed.value)
    with pytest.raises(BundleError):
        bundle.read_bytes(RUN, layout.DECISION)  # no DECISION.json, so no report can be rendered from it


def test_at_the_cap_the_same_trials_stop_as_cap(tmp_path: Path) -> None:
    bundle, refs = seeded(tmp_path, max_trials=3, factor=1.0, noise=NOISY)
    decided = gate_run(bundle, BenchCompleted(run_id=RUN, producer="test", draft=False, results=refs), "gate/test")
    level = stored(bundle)["candidates"][0]["levels"][0]
    assert decided.decision == "inconclusive" and (level["outcome"], level["stopped"]) == ("inconclusive", "cap")


def test_a_failed_cells_levels_never_continue(tmp_path: Path) -> None:
    # The candidate failed after 2 of its trials: under the cap, yet the bench measures it no more.
    bundle, refs = seeded(tmp_path, max_trials=15, factor=1.0, noise=NOISY)
    kept = [r for r in refs if "ngram-k3/trial-2/" not in r.uri]
    event = BenchCompleted(run_id=RUN, producer="test", draft=False, results=kept,
                           failed_cells={"ngram-k3": "server exited during trial 2"})
    decided = gate_run(bundle, event, "gate/test")
    level = stored(bundle)["candidates"][0]["levels"][0]
    assert decided.decision == "inconclusive"
    assert (level["outcome"], level["stopped"], level["trials_expected_more"]) == ("inconclusive", "bench_failed", 0)
    assert any("the bench measured this cell no more: server exited during trial 2" in r for r in level["reasons"])
    # A gate request reads the failure from the run's latest bench.completed in the journal.
    other, _ = seeded(tmp_path / "requested", max_trials=15, factor=1.0, noise=NOISY)
    for ref in refs:
        if "ngram-k3/trial-2/" in ref.uri:
            (other.resolve(ref.uri)).unlink()
    other.append_event(RUN, event.event_id, orjson.dumps(event.model_dump(mode="json", by_alias=True)))
    assert gate_run(other, GateRequested(run_id=RUN, producer="test", requested_by="test"), "gate/test").decision \
        == "inconclusive"
    assert stored(other)["candidates"][0]["levels"][0]["stopped"] == "bench_failed"


def test_a_failed_cell_with_all_its_trials_is_decided_on_them(tmp_path: Path) -> None:
    bundle, refs = seeded(tmp_path, max_trials=15, factor=1.0, noise=NOISY)
    event = BenchCompleted(
        run_id=RUN, producer="test", draft=False, results=refs, failed_cells={"ngram-k3": "lost its node"}
    )
    gate_run(bundle, event, "gate/test")
    assert stored(bundle)["candidates"][0]["levels"][0]["stopped"] == "bench_failed"


def test_only_a_final_decision_starts_the_report() -> None:
    # The publisher's triggers: gate.decided (which cannot carry continue), an operator's report or
    # publish request, and its own report.rendered.
    assert {spec.schema for spec in consumed_by(PUBLISHER)} == {
        "gate.decided", "report.rendered", "report.requested", "publish.requested"}
    assert "continue" not in typing.get_args(GateDecided.model_fields["decision"].annotation)
