"""`specdec bench plan RUN_ID` / `specdec training plan RUN_ID` read the stored
plan from a real bundle, re-hashed, and say whether an approval covers it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from contracts.campaign import Campaign
from contracts.events import RunApproved
from services.cli.main import main
from services.runtime.bundle.bundle import BundleStore
from tests.support.cli_runs import restore_logging  # noqa: F401 (autouse fixture)

ROOT = Path(__file__).resolve().parents[2]
RUN = "plan-cli-run-1"
PLAN = {
    "version": 1,
    "run_id": RUN,
    "executor": "local",
    "cells": [{"cell_id": "ngram-k3", "serve_argv": ["python", "-m", "vllm.entrypoints.openai.api_server",
                                                     "--speculative-config", '{"method": "ngram"}']}],
    "cleanup": ["stop the server's process group (label experiment=plan-cli-run-1)"],
}


@pytest.fixture
def bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BundleStore:
    monkeypatch.setenv("SPECDEC_BUNDLE_ROOT", str(tmp_path / "bundles"))
    store = BundleStore(tmp_path / "bundles")
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = False
    store.write_json(RUN, "campaign.json", Campaign.model_validate(data))
    return store


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bench_plan_prints_the_commands_hash_and_that_no_approval_covers_it(bundle, capsys):
    ref = bundle.write_json(RUN, "bench/plan.json", PLAN)
    code, out, err = cli(capsys, "bench", "plan", RUN)
    assert code == 0, err
    assert f"sha256: {ref.sha256}" in out
    # The argv reads as typed: the JSON item stays one quoted word.
    assert "--speculative-config '{\"method\": \"ngram\"}'" in out
    assert "label experiment=plan-cli-run-1" in out
    assert f"specdec approve {RUN} --i-understand-this-mutates-cluster" in out


def test_bench_plan_json_is_the_stored_document(bundle, capsys):
    bundle.write_json(RUN, "bench/plan.json", PLAN)
    code, out, _ = cli(capsys, "bench", "plan", RUN, "--json")
    assert code == 0
    assert json.loads(out) == PLAN


def test_an_approval_in_the_journal_that_names_the_hash_is_shown(bundle, capsys):
    ref = bundle.write_json(RUN, "training/plan.json", {"executor": "local", "node": "n1", "launch": {
        "kind": "local", "argv": ["python", "train.py", "--note", "two words"], "cwd": "/srv", "env_added": {}}})
    approval = RunApproved(run_id=RUN, producer="cli/test", i_understand_this_mutates_cluster=True,
                           plan_sha256s=[ref.sha256], approved_by="ops@host")
    bundle.append_event(RUN, approval.event_id, approval.model_dump_json(by_alias=True).encode())
    code, out, err = cli(capsys, "training", "plan", RUN)
    assert code == 0, err
    assert f"covered by run.approved {approval.event_id} (ops@host)" in out
    assert "launch (local): python train.py --note 'two words'" in out


def test_a_run_without_the_plan_says_which_step_and_what_to_check(bundle, capsys):
    code, _, err = cli(capsys, "bench", "plan", RUN)
    assert code == 2
    assert "has no bench plan (bench/plan.json" in err and f"specdec status {RUN}" in err


def test_a_plan_changed_after_it_was_stored_is_refused(bundle, capsys):
    bundle.write_json(RUN, "bench/plan.json", PLAN)
    path = bundle.run_dir(RUN) / "bench/plan.json"
    path.write_text(path.read_text().replace("ngram", "eagle"))
    code, out, err = cli(capsys, "bench", "plan", RUN)
    assert code == 2 and out == ""
    assert "cannot be trusted" in err


def test_a_campaign_that_cannot_be_trusted_says_the_approval_state_is_unknown(bundle, capsys):
    bundle.write_json(RUN, "bench/plan.json", PLAN)
    path = bundle.run_dir(RUN) / "campaign.json"
    path.write_text(path.read_text().replace("false", "true", 1))
    code, out, err = cli(capsys, "bench", "plan", RUN)
    assert code == 2 and "approval state is unknown" in err
