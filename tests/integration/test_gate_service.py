"""The gate service through a real Redis: bench.completed -> gate.decided."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import yaml

from contracts.campaign import Campaign, SpeculativeConfig
from contracts.events import BenchCompleted, GateRequested
from services.gate.simulate import identity, spec_counters, trial_result
from services.runtime.bundle import BundleStore
from tests.support.services import running, wait_events

EXAMPLE = Path(__file__).resolve().parents[2] / "infra/examples/campaign.yaml"
RUN = "toy-20261130-010101-abcdef"


def seed_bundle(bundle: BundleStore, factor: float) -> list:
    campaign = Campaign.model_validate(yaml.safe_load(EXAMPLE.read_text()))
    bundle.write_json(RUN, "campaign.json", campaign)
    rng = np.random.default_rng(7)
    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=3)
    refs = []
    for trial in range(3):
        arms = {
            "standing": trial_result(rng, ident=identity("standing", concurrency=1, trial=trial)),
            "ngram-k3": trial_result(
                rng, factor=factor,
                ident=identity("ngram-k3", concurrency=1, trial=trial, speculative=spec, baseline_cell_id="standing"),
                counters=spec_counters(0.6, 3),
            ),
        }
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
