"""tests/perf/real_aa.py builds its A/A campaign from the demo campaign and records each campaign's trials."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from contracts.campaign import Campaign
from tests.perf.real_aa import DEMO, AACampaignError, aa_campaign, campaign_record, table, write_record


def demo() -> dict:
    return yaml.safe_load(DEMO.read_text())


def test_the_aa_campaign_serves_the_standing_cell_again_and_trains_nothing() -> None:
    campaign = aa_campaign(demo(), [1])
    cells = campaign["matrix"]["cells"]
    assert [(c["cell_id"], c["role"]) for c in cells] == [("standing", "standing"), ("standing-again", "candidate")]
    assert cells[1]["serving"] == cells[0]["serving"] and cells[1]["concurrency"] == [1]
    # Nothing trains: the contract refuses a trainer and what only a training reads.
    assert "train" not in campaign["commands"]
    assert "trainer" not in campaign["source_revisions"]
    assert "training" not in campaign["review"]["pre_approve"]
    model = Campaign.model_validate(campaign)
    assert model.trains_nothing


def test_the_aa_campaign_runs_sequential_rounds() -> None:
    gate = aa_campaign(demo())["gate"]
    assert gate["max_trials"] == demo()["gate"]["max_trials"] > gate["min_trials"]
    assert aa_campaign(demo(), max_trials=8)["gate"]["max_trials"] == 8
    with pytest.raises(AACampaignError, match="not above gate.min_trials 3"):
        aa_campaign(demo(), max_trials=3)
    fixed = demo()
    fixed["gate"].pop("max_trials", None)
    with pytest.raises(AACampaignError, match="fixed-trial campaign"):
        aa_campaign(fixed)


def _level(concurrency: int, trials: int, verdict: str, stopped: str) -> dict:
    return {"concurrency": concurrency, "outcome": "inconclusive", "trials_used": trials, "stopped": stopped,
            "objective": {"verdict": verdict, "interval": {"low_pct": -6.0, "high_pct": 4.5}},
            "baseline": {"trials": trials}, "candidate": {"trials": trials}}


def test_a_campaign_record_gives_each_arms_trials_per_level_and_the_decision(tmp_path: Path) -> None:
    bundle = tmp_path / "smollm2-aa-1"
    (bundle / "gate").mkdir(parents=True)
    decision = {"decision": "inconclusive", "winner": None, "thresholds": {"max_trials": 4},
                "candidates": [{"candidate": "standing-again", "levels": [_level(1, 4, "undecided", "data_problem")]}]}
    (bundle / "gate/DECISION.json").write_text(json.dumps(decision))
    record = campaign_record(bundle, 0, 431.4)
    assert record["decision"] == "inconclusive" and record["max_trials"] == 4 and record["wall_s"] == 431.4
    assert record["levels"] == [{"candidate": "standing-again", "concurrency": 1, "trials_standing": 4,
                                 "trials_again": 4, "trials_used": 4, "stopped": "data_problem",
                                 "outcome": "inconclusive", "verdict": "undecided", "interval_pct": [-6.0, 4.5]}]
    failed = campaign_record(None, 1, 12.0)
    text = table([record, failed])
    assert (
        "| smollm2-aa-1 | 0 | 431 s | inconclusive (cap 4) | c=1 | 4 / 4 | 4 | data_problem | undecided, -6.0..+4.5 % |"
        in text
    )
    assert "0 of 1 A/A campaigns with a decision promoted; 0 had the objective better at every level" in text
    assert "1 without a decision" in text
    out = tmp_path / "real-aa.json"
    write_record([failed], out, "setup", fresh=True)
    assert [r["run_id"] for r in write_record([record], out, "setup", fresh=False)] == [None, "smollm2-aa-1"]
    assert out.with_suffix(".md").read_text().startswith("Real A/A campaigns (tests/perf/real_aa.py): setup")
