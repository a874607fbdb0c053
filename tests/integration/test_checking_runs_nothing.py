"""Checking a campaign starts no program the campaign names.

A hostile campaign names programs that leave a marker file when they run: two suffix cells whose serve
command's program looks like a Python interpreter (`./python-x`, relative to where the check runs, and an
absolute `.../python3-evil`), and an idle check. `specdec validate` (a process of its own, as CI runs it),
`specdec submit`'s checks, and the use cases of the MCP tools campaign_validate and campaign_init read the
file and must leave no marker: a check that needs the serving interpreter runs in the bench step, after review
(tests/unit/bench/executors/test_preflight.py), the idle check in the capacity step of a published run whose campaign
carries the acknowledgement, and before each launch (a dry run without it runs no idle check either:
tests/integration/test_capacity_service.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import structlog
import yaml

from services.app.campaign.validate import validate
from services.app.context import connect
from services.app.workflow import workflow
from services.cli.main import main
from services.runtime.settings import RuntimeSettings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "infra/examples/campaign.yaml"
SERVE_TAIL = ["-m", "vllm.entrypoints.openai.api_server", "--model", "{model}", "--max-model-len", "{max_model_len}",
              "{enforce_eager_flag}", "--speculative-config", "{speculative_config_json}", "--port", "{port}"]


def _program(path: Path, marker: Path) -> None:
    """An executable that leaves `marker` behind and fails, as anything the campaign names could."""
    path.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    path.chmod(0o755)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path, list[Path]]:
    """(the working directory a check runs from, the campaign file, the markers that must stay absent)."""
    work, bin_dir, marks = tmp_path / "work", tmp_path / "bin", tmp_path / "marks"
    for folder in (work, bin_dir, marks):
        folder.mkdir()
    markers = [marks / "relative-python-ran", marks / "absolute-python-ran", marks / "idle-check-ran"]
    _program(work / "python-x", markers[0])
    _program(bin_dir / "python3-evil", markers[1])
    _program(bin_dir / "idle-check", markers[2])
    data = yaml.safe_load(EXAMPLE.read_text())
    data["traffic"]["path"] = str(ROOT / data["traffic"]["path"])
    data["capacity"]["idle_check"] = [str(bin_dir / "idle-check"), "{node}"]
    cells = data["matrix"]["cells"]
    template = next(c for c in cells if c["cell_id"] == "ngram-k3")
    for cell_id, program in (("suffix-rel", "./python-x"), ("suffix-abs", str(bin_dir / "python3-evil"))):
        cell = {**template, "cell_id": cell_id}
        cell["serving"] = {**template["serving"],
                           "speculative": {"method": "suffix", "num_speculative_tokens": 3}}
        cell["vllm_sweep"] = {"serve_cmd": [program, *SERVE_TAIL]}
        cells.append(cell)
    path = tmp_path / "hostile.yaml"
    path.write_text(yaml.safe_dump(data))
    return work, path, markers


def _ran(markers: list[Path]) -> list[str]:
    return [m.name for m in markers if m.exists()]


def test_specdec_validate_runs_no_program_the_campaign_names(settings_env, hostile):
    work, path, markers = hostile
    done = subprocess.run([sys.executable, "-m", "services.cli.main", "validate", str(path)], cwd=work,
                          env=settings_env, capture_output=True, text=True, timeout=120)
    assert _ran(markers) == []
    assert done.returncode == 0, done.stdout + done.stderr
    assert "would be accepted" in done.stdout


def test_submit_checks_run_no_program_the_campaign_names(settings: RuntimeSettings, hostile, monkeypatch, capsys):
    work, path, markers = hostile
    for name, value in settings.model_dump().items():
        monkeypatch.setenv(f"SPECDEC_{name.upper()}", str(value))
    monkeypatch.chdir(work)
    try:
        code = main(["submit", str(path)])
    finally:
        structlog.reset_defaults()
    assert _ran(markers) == []
    assert code == 0, capsys.readouterr().err


def test_campaign_validate_runs_no_program_the_campaign_names(hostile, monkeypatch):
    work, path, markers = hostile
    monkeypatch.chdir(work)
    found = validate(path)
    assert _ran(markers) == []
    assert found.accepted, found.problems


async def test_campaign_init_runs_no_program_the_campaign_names(settings: RuntimeSettings, hostile, monkeypatch):
    work, path, markers = hostile
    monkeypatch.chdir(work)
    async with connect(settings) as session:
        created = await workflow.evidence_init(session, "toy-llama", None)
        assert created.run_id is not None
        stored = await workflow.campaign_init(session, path, created.run_id, "toy-llama", evidence_bundle=None)
    assert _ran(markers) == []
    assert stored.run_id == created.run_id
