"""`specdec validate`: every check submit makes, with nothing created.

Every example campaign is accepted; a file with five distinct problems is refused
with all five named, exit 2, and leaves the bundle root and the streams as they
were. The command runs as a user runs it (a process of its own, the settings in
its environment); the demo refuses the same file with the reasons alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import yaml

from services.runtime.settings import RuntimeSettings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "infra/examples").glob("*.yaml"))


def specdec(env: dict[str, str], *argv: str, module: str = "services.cli.main") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def _keys(settings: RuntimeSettings) -> list[bytes]:
    client = redis.Redis.from_url(settings.redis_url)
    try:
        return list(client.scan_iter(match=f"{settings.stream_prefix}*"))
    finally:
        client.close()


def five_problems(tmp_path: Path) -> Path:
    """The example campaign with five distinct mistakes a user makes."""
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["bogus_key"] = 1                                          # an unknown key
    data["family"] = "Bad Family!"                                 # a family no label can carry
    data["gate"]["objective"] = "speed"                            # no such metric
    data["matrix"]["cells"][1]["concurrency"] = [0]                # a level nothing can measure
    data["publish"]["target"] = "ftp://lake.example.com/reports"   # no such publish scheme
    path = tmp_path / "five-problems.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_every_example_campaign_is_accepted(settings_env):
    assert EXAMPLES, "no example campaign found"
    for example in EXAMPLES:
        done = specdec(settings_env, "validate", str(example.relative_to(ROOT)))
        assert done.returncode == 0, f"{example.name}: {done.stdout}{done.stderr}"
        assert "would be accepted" in done.stdout


def test_five_problems_are_named_at_once_and_nothing_is_created(settings, settings_env, tmp_path):
    path = five_problems(tmp_path)
    before = _keys(settings)
    done = specdec(settings_env, "validate", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    for needle in ("bogus_key: Extra inputs are not permitted", "family: String should match pattern",
                   "gate.objective is not METRIC", "publish target 'ftp://lake.example.com/reports'",
                   "{'ngram-k3': 0} have a lower concurrency level"):
        assert needle in done.stdout, f"{needle!r} not named:\n{done.stdout}"
    assert "(5 problem(s))" in done.stdout
    # --json: the same problems, machine-readable.
    as_json = specdec(settings_env, "validate", str(path), "--json")
    assert as_json.returncode == 2
    result = json.loads(as_json.stdout)
    assert result["accepted"] is False and len(result["problems"]) == 5 and result["cells"] == []
    # Nothing created: no bundle root, no stream or key of this prefix.
    assert not settings.bundle_root.exists()
    assert _keys(settings) == before == []


def test_json_shows_each_cells_declared_serving_config(settings, settings_env):
    done = specdec(settings_env, "validate", "infra/examples/toy-campaign.yaml", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["accepted"] is True and result["problems"] == []
    cells = {cell["cell_id"]: cell for cell in result["cells"]}
    toy = yaml.safe_load((ROOT / "infra/examples/toy-campaign.yaml").read_text())
    assert set(cells) == {cell["cell_id"] for cell in toy["matrix"]["cells"]}
    ngram = cells["ngram-k3"]["serving"]["speculative"]
    assert ngram["method"] == "ngram" and ngram["num_speculative_tokens"] == 3
    assert cells["standing"]["serving"]["speculative"] is None
    # The model each cell serves is named even where the cell left it to the target.
    assert all(cell["serving"]["model"] for cell in cells.values())
    assert not settings.bundle_root.exists() and _keys(settings) == []


@pytest.mark.parametrize("campaign", ["five-problems.yaml", "no-such-campaign.yaml"])
def test_the_demo_refuses_bad_input_with_the_reasons_alone(settings, settings_env, tmp_path, campaign):
    path = five_problems(tmp_path) if campaign == "five-problems.yaml" else tmp_path / campaign
    done = specdec(settings_env, "--campaign", str(path), module="services.cli.demo")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "cannot be submitted; nothing was started" in done.stderr
    assert "starting services" not in done.stdout  # refused before any model or service
    assert not settings.bundle_root.exists() and _keys(settings) == []


def six_matrix_problems(tmp_path: Path) -> Path:
    """The example campaign with six independent mistakes, four of them in one matrix."""
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    cells = data["matrix"]["cells"]
    cells[2]["cell_id"] = "ngram-k3"                                   # a duplicate cell_id
    cells[0]["trials"] = 1                                             # one trial, not exploratory
    cells[1]["serving"]["graph_mode"] = "graph"                        # arms in different graph modes
    cells[0]["node"], cells[1]["node"] = "node-a", "node-b"            # arms on different nodes
    cells[1]["regime"] = "warm-interleaved"                            # one cell interleaved, the others not
    data["gate"]["min_trials"] = 1                                     # no spread from one trial
    path = tmp_path / "six-problems.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_matrix_names_every_problem_not_only_its_first(settings_env, tmp_path):
    done = specdec(settings_env, "validate", str(six_matrix_problems(tmp_path)))
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("  - ")]
    assert len(lines) == 6 and "(6 problem(s))" in done.stdout, done.stdout
    for needle in ("duplicate cell_id", "fewer than 3 trials", "differ in graph mode", "differ in node",
                   "are regime warm-interleaved", "gate.min_trials"):
        assert sum(needle in line for line in lines) == 1, f"{needle!r} not named once:\n{done.stdout}"
