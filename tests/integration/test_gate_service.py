"""The gate service through a real Redis: bench.completed -> gate.decided."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import orjson
import yaml

from contracts import layout
from contracts.campaign import Campaign, SpeculativeConfig
from contracts.events import BenchCompleted, GateRequested
from services.gate.simulate import identity, spec_counters, trial_result
from services.runtime.bundle.bundle import BundleStore
from tests.support.services import running, wait_events

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "infra/examples/campaign.yaml"
RUN = "toy-20261130-010101-abcdef"


def seed_bundle(bundle: BundleStore, factor: float, *, guards: list[str] | None = None,
                candidate_node: str = "node-1", candidate_throughput: float = 1.0) -> list:
    """The example campaign (its gate with `guards`) and 3 trials per arm; the candidate served on
    `candidate_node` with its output throughput scaled by `candidate_throughput`."""
    data = yaml.safe_load(EXAMPLE.read_text())
    data["gate"]["guards"] = guards or []
    bundle.write_json(RUN, "campaign.json", Campaign.model_validate(data))
    rng = np.random.default_rng(7)
    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=3)
    refs = []
    for trial in range(3):
        arms = {
            "standing": trial_result(rng, ident=identity("standing", concurrency=1, trial=trial)),
            "ngram-k3": trial_result(
                rng, factor=factor,
                ident=identity("ngram-k3", concurrency=1, trial=trial, speculative=spec, baseline_cell_id="standing",
                               node=candidate_node),
                counters=spec_counters(0.6, 3),
            ),
        }
        arms["ngram-k3"]["output_throughput"] *= candidate_throughput
        for cell, result in arms.items():
            refs.append(bundle.write_bytes(RUN, f"bench/{cell}/trial-{trial}/result-c1.json", orjson.dumps(result)))
    return refs


async def test_clear_win_is_promoted(settings):
    bundle = BundleStore(settings.bundle_root)
    refs = seed_bundle(bundle, factor=0.7)
    async with running("gate", settings) as service:
        await service.bus.publish(BenchCompleted(run_id=RUN, producer="test", results=refs, draft=False))
        events = await wait_events(settings, {"gate.decided"}, run_id=RUN)
    decided = events["gate.decided"]
    assert decided["decision"] == "promote" and decided["winner"] == "ngram-k3"
    stored = orjson.loads(bundle.read_bytes(RUN, "gate/DECISION.json"))
    assert stored["decision"] == "promote"
    assert decided["decision_ref"]["sha256"] == bundle.ref(RUN, "gate/DECISION.json").sha256


async def test_gate_requested_reads_the_bundle_and_a_loss_is_rejected(settings):
    bundle = BundleStore(settings.bundle_root)
    seed_bundle(bundle, factor=1.4)
    async with running("gate", settings) as service:
        await service.bus.publish(GateRequested(run_id=RUN, producer="test", requested_by="test"))
        events = await wait_events(settings, {"gate.decided"}, run_id=RUN)
    assert events["gate.decided"]["decision"] == "reject"


async def test_the_campaigns_guards_reject_a_candidate_worse_on_one(settings):
    """gate.guards of the stored campaign: the candidate wins TPOT but loses half its throughput."""
    bundle = BundleStore(settings.bundle_root)
    seed_bundle(bundle, factor=0.7, guards=["output_throughput", "ttft:p99"], candidate_throughput=0.4)
    async with running("gate", settings) as service:
        await service.bus.publish(GateRequested(run_id=RUN, producer="test", requested_by="test"))
        events = await wait_events(settings, {"gate.decided"}, run_id=RUN)
    assert events["gate.decided"]["decision"] == "reject"
    level = orjson.loads(bundle.read_bytes(RUN, layout.DECISION))["candidates"][0]["levels"][0]
    assert level["objective"]["verdict"] == "better"
    assert any(r.startswith("guard output_throughput is worse beyond the noise") for r in level["reasons"])
    assert [(g["guard"], g["passed"]) for g in level["guards"]] == [("output_throughput", False), ("ttft:p99", True)]
    assert level["guards"][0]["comparison"]["verdict"] == "worse"


async def test_arms_served_on_different_nodes_are_inconclusive(settings):
    bundle = BundleStore(settings.bundle_root)
    seed_bundle(bundle, factor=0.7, candidate_node="node-2")
    async with running("gate", settings) as service:
        await service.bus.publish(GateRequested(run_id=RUN, producer="test", requested_by="test"))
        events = await wait_events(settings, {"gate.decided"}, run_id=RUN)
    assert events["gate.decided"]["decision"] == "inconclusive"
    level = orjson.loads(bundle.read_bytes(RUN, layout.DECISION))["candidates"][0]["levels"][0]
    [why] = [r for r in level["reasons"] if "did not all run on one node" in r]
    assert "node node-1: baseline trial 0" in why and "node node-2: candidate trial 0" in why


async def test_no_results_fails_the_step_with_the_reason(settings):
    bundle = BundleStore(settings.bundle_root)
    campaign = Campaign.model_validate(yaml.safe_load(EXAMPLE.read_text()))
    bundle.write_json(RUN, "campaign.json", campaign)
    async with running("gate", settings) as service:
        await service.bus.publish(GateRequested(run_id=RUN, producer="test", requested_by="test"))
        events = await wait_events(settings, {"gate.decided", "gate.failed"}, run_id=RUN)
    assert "no trial results" in events["gate.failed"]["reason"]


async def test_every_candidate_failed_names_each_cell_and_why(settings):
    bundle = BundleStore(settings.bundle_root)
    refs = seed_bundle(bundle, factor=0.7)
    standing_only = [ref for ref in refs if "/standing/" in ref.uri]
    failed = {"ngram-k3": "speculation declared but not active as declared in cell ngram-k3"}
    async with running("gate", settings) as service:
        await service.bus.publish(BenchCompleted(run_id=RUN, producer="test", results=standing_only,
                                                 failed_cells=failed, draft=False))
        events = await wait_events(settings, {"gate.decided", "gate.failed"}, run_id=RUN)
    reason = events["gate.failed"]["reason"]
    assert reason.startswith("every candidate cell failed in the bench")
    assert "ngram-k3: speculation declared but not active" in reason
    assert events["gate.failed"]["error_type"] == "NoCandidates"


async def test_specdec_request_gate_never_counts_a_rejected_trial(settings, settings_env):
    """`specdec request gate RUN` on a bundle with one trial the bench rejected (under its own name) and
    one result file whose counters were edited after the bench wrote it: neither counts, the reasons say so."""
    bundle = BundleStore(settings.bundle_root)
    seed_bundle(bundle, factor=0.7)
    rng = np.random.default_rng(11)
    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=3)
    # A second candidate, measured cleanly: the decision rests on it.
    for trial in range(3):
        ident = identity("ngram-k4", concurrency=1, trial=trial,
                         speculative=spec.model_copy(update={"num_speculative_tokens": 4}),
                         baseline_cell_id="standing")
        result = trial_result(rng, factor=0.4, ident=ident, counters=spec_counters(0.6, 4))
        bundle.write_bytes(RUN, layout.trial_result("ngram-k4", trial, 1), orjson.dumps(result))
    # ngram-k3's trial 2 as the bench keeps a rejected trial: the whole result and its problems.
    good = orjson.loads(bundle.read_bytes(RUN, layout.trial_result("ngram-k3", 2, 1)))
    (bundle.run_dir(RUN) / layout.trial_result("ngram-k3", 2, 1)).unlink()
    rejected = good | {"spec_decode": good["spec_decode"] | {"num_drafts": 0, "num_draft_tokens": 0},
                       "speculation_problems": ["no drafts during the measured window"]}
    bundle.write_bytes(RUN, layout.rejected_result("ngram-k3", 2, 1), orjson.dumps(rejected))
    # ngram-k3's trial 1 edited by hand after the bench: an empty per-position list with k=3.
    path = bundle.run_dir(RUN) / layout.trial_result("ngram-k3", 1, 1)
    edited = orjson.loads(path.read_bytes())
    edited["spec_decode"]["accepted_per_position"] = []
    path.write_bytes(orjson.dumps(edited))

    async with running("gate", settings):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.cli.main", "request", "gate", RUN, env=settings_env, cwd=ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        events = await wait_events(settings, {"gate.decided"}, run_id=RUN)
    reasons = events["gate.decided"]["reasons"]
    assert reasons[1].startswith("2 trial(s) rejected and not counted")
    assert ("cell ngram-k3 trial 2 at concurrency 1 (rejected by the bench: no drafts during the measured window)"
            in reasons[1])
    assert ("cell ngram-k3 trial 1 at concurrency 1 (rejected by the gate's re-check: 0 per-position series"
            in reasons[1])
    # The decision rests on the trials that count: ngram-k4 wins; ngram-k3, one trial left, cannot.
    assert events["gate.decided"]["decision"] == "promote" and events["gate.decided"]["winner"] == "ngram-k4"
    decision = orjson.loads(bundle.read_bytes(RUN, layout.DECISION))
    counted = [f for c in decision["candidates"] for lvl in c["levels"] for f in lvl["candidate"]["files"]]
    assert not any("rejected-c" in f for f in counted) and len(counted) == 4
    assert not any(f.endswith(layout.trial_result("ngram-k3", 1, 1)) for f in counted)
    outcomes = {c["candidate"]: c["outcome"] for c in decision["candidates"]}
    assert outcomes == {"ngram-k3": "inconclusive", "ngram-k4": "win"}
    level = {c["candidate"]: c["levels"][0] for c in decision["candidates"]}
    assert any("trial 2 was rejected by the bench and is not counted" in r for r in level["ngram-k3"]["reasons"])
    assert any("trial 1 was rejected by the gate's re-check" in r for r in level["ngram-k3"]["reasons"])
    assert level["ngram-k3"]["candidate"]["trials"] == 1
