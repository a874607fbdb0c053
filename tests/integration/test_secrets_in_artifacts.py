"""A secret-bearing flag's value never leaves in an artifact: a campaign whose serve command carries
`--hf-token hf_SECRETVALUE123` (and a trainer with `--api-key`) is rendered into the report, shown as a plan
(CLI text and --json, the MCP result's model, the MCP resources of the files holding commands) and recorded
as the trainer's argv.json, and every byte produced or published is searched for the values. A real bundle,
the real renderer and the real CLI."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from contracts import layout
from contracts.campaign.canonical import CanonicalCellRecord, CanonicalRecord
from services.app.runs import plans
from services.cli.main import main
from services.mcp.resources import read_file
from services.publisher.pipeline import render_run
from services.publisher.publish.outbox import outbox
from services.runtime.bundle.bundle import BundleStore
from services.trainer_proxy.execution.capture import write_argv
from services.trainer_proxy.planning.model import LocalLaunch, TrainingPlan
from tests.unit.publisher.synthetic import CANDIDATE, RUN, STANDING, Spec, build

SECRETS = ("hf_SECRETVALUE123", "sk-apikey-SECRET-456", "tok-SECRET-789")
SERVE = ["vllm", "serve", "/models/target", "--hf-token", SECRETS[0], f"--api-key={SECRETS[1]}", "--port", "{port}"]


def _canonical() -> CanonicalRecord:
    def cell(cell_id: str, role: str) -> CanonicalCellRecord:
        return CanonicalCellRecord(cell_id=cell_id, role=role, notes=None, identity={"model": "target"},
                                   serve_cmd=SERVE, parsed_by_vllm=True,
                                   engine_args={"hf_token": SECRETS[0], "api_key": SECRETS[1], "dtype": "auto"},
                                   rewrites=[], bench_cmd=["vllm", "bench", "serve", "--token", SECRETS[2]])
    return CanonicalRecord(name="leaky", description=None, experiment_id=None, evidence_bundle_path=None,
                           provenance={}, comparator_baseline=STANDING,
                           cells=[cell(STANDING, "standing"), cell(CANDIDATE, "candidate")])


def _leaks(data: bytes) -> list[str]:
    return [secret for secret in SECRETS if secret.encode() in data]


def test_no_secret_flag_value_in_the_report_the_plan_displays_or_argv_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SPECDEC_BUNDLE_ROOT", str(tmp_path / "bundles"))
    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    build(bundle, Spec())
    bundle.write_json(RUN, layout.CANONICAL, _canonical())
    launched = [token.replace("{port}", "8000") for token in SERVE]
    bundle.write_json(RUN, layout.BENCH_PLAN, {
        "version": 1, "run_id": RUN, "executor": "local",
        "cells": [{"cell_id": STANDING, "serve_argv": launched, "declared_serve_argv": SERVE,
                   "bench": ["vllm", "bench", "serve", "--token", SECRETS[2]]}],
        "cleanup": [f"stop the servers (label experiment={RUN})"]})
    launch = LocalLaunch(argv=[sys.executable, "train.py", "--api-key", SECRETS[1], f"--hf-token={SECRETS[0]}"],
                         cwd=str(tmp_path), env_added={}, stdout_path=layout.TRAINING_STDOUT,
                         stderr_path=layout.TRAINING_STDERR)
    bundle.write_json(RUN, layout.TRAINING_PLAN, {"version": 1, "run_id": RUN, "executor": "local",
                                                   "launch": launch.model_dump()})
    plan = TrainingPlan.model_construct(  # type: ignore[call-arg]  # a partial plan: the fields write_argv reads
        run_id=RUN, executor="local", node="localhost", launch=launch)
    write_argv(bundle, plan)

    produced: dict[str, bytes] = {}
    rendered = render_run(bundle, RUN)
    for ref in rendered.refs:
        produced[ref.uri] = bundle.resolve(ref.uri).read_bytes()
    for name, data, _ in outbox(bundle, RUN).objects():
        produced[f"published:{name}"] = data
    produced["training/argv.json"] = (bundle.run_dir(RUN) / layout.TRAINING_ARGV).read_bytes()
    for step in ("bench", "training"):
        for extra in ((), ("--json",)):
            capsys.readouterr()
            assert main([step, "plan", RUN, *extra]) == 0
            out, err = capsys.readouterr()
            produced[f"specdec {step} plan {' '.join(extra)}"] = (out + err).encode()
        shown = plans.show_plan(bundle, step, RUN)  # what the MCP tool plan_show returns
        produced[f"plan_show {step}"] = (shown.model_dump_json() + plans.describe(shown)).encode()
    for relpath in (layout.BENCH_PLAN, layout.TRAINING_PLAN, layout.CANONICAL, layout.TRAINING_ARGV):
        produced[f"mcp resource bundle://{RUN}/{relpath}"] = read_file(bundle, RUN, relpath)
    assert "hf_token" in produced[f"bundle://{RUN}/{layout.REPORT_MARKDOWN}"].decode()  # the section was rendered
    leaked = {where: _leaks(data) for where, data in produced.items() if _leaks(data)}
    assert not leaked, f"secret values found in: {sorted(leaked)}"
    # The launch still gets the real value: the stored plan is the operator's command as written.
    assert SECRETS[0] in bundle.read_json(RUN, layout.BENCH_PLAN)["cells"][0]["serve_argv"]


def test_no_secret_flag_value_in_what_validate_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    root = Path(__file__).resolve().parents[2]
    data = yaml.safe_load((root / "infra/examples/canonical-campaign.yaml").read_text())
    path = tmp_path / "leaky.yaml"
    monkeypatch.chdir(root)
    # Accepted (both arms carry the flag), and refused (the arms differ in it): neither answer quotes the value.
    for cells, accepted in (((0, 1), True), ((1,), False)):
        changed = yaml.safe_load(yaml.safe_dump(data))
        for i in cells:
            changed["cells"][i]["vllm_sweep"]["serve_cmd"] += f" --hf-token {SECRETS[0]}"
        path.write_text(yaml.safe_dump(changed))
        for extra in ((), ("--json",)):
            capsys.readouterr()
            code = main(["validate", str(path), *extra])
            out, err = capsys.readouterr()
            assert (code == 0) == accepted, out + err
            if extra or not accepted:  # the flag is shown (--json's cells, the refusal), its value is not
                assert "hf_token" in out + err or "hf-token" in out + err
            assert not _leaks((out + err).encode()), out + err
