"""`specdec submit` and a suffix cell: accepted with the package's version in the bundle's source revisions
where the serving interpreter is submit's own (read from its installed packages); accepted with no version
where it is another interpreter, which submit never runs (the bench-runner asks it before the cell's first
launch: tests/unit/bench/executors/test_preflight.py).

Real interpreters: this venv's (make setup installs the package) and the base Python it was made from."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import orjson
import pytest
import structlog
import yaml

from contracts.campaign import Campaign
from services.cli.main import main
from services.runtime.settings import RuntimeSettings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "infra/examples/campaign.yaml"
BASE_PYTHON = getattr(sys, "_base_executable", None)


@pytest.fixture(autouse=True)
def _env(settings: RuntimeSettings, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in settings.model_dump().items():
        monkeypatch.setenv(f"SPECDEC_{name.upper()}", str(value))
    monkeypatch.chdir(ROOT)
    yield
    structlog.reset_defaults()


def _campaign(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    cell = next(c for c in data["matrix"]["cells"] if c["cell_id"] == "ngram-k3")
    cell["cell_id"] = "suffix-k3"
    cell["serving"]["speculative"] = {"method": "suffix", "num_speculative_tokens": 3,
                                      "suffix_decoding_max_spec_factor": 2.0}
    edit(data)
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _submit(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["submit", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_suffix_cell_is_submitted_with_the_package_version_recorded(capsys, settings, tmp_path):
    installed = version("arctic-inference")  # make setup installs it in this venv
    code, out, err = _submit(capsys, _campaign(tmp_path, lambda data: None))
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]
    stored = orjson.loads((Path(settings.bundle_root) / run_id / "campaign.json").read_bytes())
    assert stored["source_revisions"]["suffix_decoding"] == f"arctic-inference=={installed}"
    spec = Campaign.model_validate(stored).matrix.cells[1].serving.speculative
    assert spec.method == "suffix" and spec.suffix_decoding_max_spec_factor == 2.0


def test_a_suffix_cell_served_by_another_interpreter_is_accepted_without_a_version(capsys, settings, tmp_path):
    assert BASE_PYTHON and BASE_PYTHON != sys.executable

    def serve_with_base_python(data: dict[str, Any]) -> None:
        cell = next(c for c in data["matrix"]["cells"] if c["cell_id"] == "suffix-k3")
        cell["vllm_sweep"] = {"serve_cmd": [BASE_PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model",
                                            "{model}", "--max-model-len", "{max_model_len}", "{enforce_eager_flag}",
                                            "--speculative-config", "{speculative_config_json}",
                                            "--port", "{port}"]}

    code, out, err = _submit(capsys, _campaign(tmp_path, serve_with_base_python))
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]
    stored = orjson.loads((Path(settings.bundle_root) / run_id / "campaign.json").read_bytes())
    assert stored["source_revisions"]["suffix_decoding"] is None


def test_an_operator_suffix_revision_is_replaced(capsys, settings, tmp_path):
    path = _campaign(tmp_path, lambda data: data["source_revisions"].update(suffix_decoding="arctic-inference==9"))
    code, out, err = _submit(capsys, path)
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]
    stored = orjson.loads((Path(settings.bundle_root) / run_id / "campaign.json").read_bytes())
    assert stored["source_revisions"]["suffix_decoding"] != "arctic-inference==9"
    inert = orjson.loads((Path(settings.bundle_root) / run_id / "inert.json").read_bytes())
    assert "source_revisions.suffix_decoding" in inert
