"""An exploratory matrix's decision is a DRAFT, whatever the trial counts: the gate step
marks DECISION.json and gate.decided's reasons (bench.completed.draft, else the run's
latest bench.completed, else the stored campaign's matrix). Runs `gate_run` on a real
bundle folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
import yaml

from contracts import layout
from contracts.campaign import Campaign, SpeculativeConfig
from contracts.events import BenchCompleted, GateRequested
from services.gate.app import gate_run
from services.gate.simulate import identity, spec_counters, trial_result
from services.runtime.bundle.bundle import BundleStore

ROOT = Path(__file__).resolve().parents[3]
RUN = "toy-20261130-040404-abcdef"


def seeded(tmp_path: Path, *, exploratory: bool) -> tuple[BundleStore, list]:
    bundle = BundleStore(tmp_path / "bundles")
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["matrix"]["exploratory"] = exploratory  # every cell keeps its 3 trials
    bundle.write_json(RUN, layout.CAMPAIGN, Campaign.model_validate(data))
    rng = np.random.default_rng(7)
    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=3)
    refs = []
    for trial in range(3):
        arms = {
            "standing": trial_result(rng, ident=identity("standing", concurrency=1, trial=trial)),
            "ngram-k3": trial_result(rng, factor=0.7, counters=spec_counters(0.6, 3), ident=identity(
                "ngram-k3", concurrency=1, trial=trial, speculative=spec, baseline_cell_id="standing")),
        }
        for cell, result in arms.items():
            refs.append(bundle.write_bytes(RUN, f"bench/{cell}/trial-{trial}/result-c1.json", orjson.dumps(result)))
    return bundle, refs


@pytest.mark.parametrize("exploratory", [False, True])
def test_the_decision_of_an_exploratory_matrix_is_a_draft(tmp_path, exploratory):
    bundle, refs = seeded(tmp_path, exploratory=exploratory)
    event = BenchCompleted(run_id=RUN, producer="test", results=refs, draft=exploratory)
    decided = gate_run(bundle, event, "gate/test")
    stored = orjson.loads(bundle.read_bytes(RUN, layout.DECISION))
    assert stored["decision"] == decided.decision == "promote"  # marked, not changed
    assert stored["draft"] is exploratory
    marked = [r for r in decided.reasons if r.startswith("DRAFT: ")]
    assert len(marked) == (1 if exploratory else 0) and decided.reasons[0].startswith("promote")


def test_a_gate_request_reads_the_draft_from_the_stored_campaign(tmp_path):
    bundle, _ = seeded(tmp_path, exploratory=True)
    gate_run(bundle, GateRequested(run_id=RUN, producer="test", requested_by="test"), "gate/test")
    assert orjson.loads(bundle.read_bytes(RUN, layout.DECISION))["draft"] is True
