"""A plan a reviewer reads in one screen (services/shared/plan_view.py): `specdec bench plan` of the demo
campaign, planned by the real bench planner into a real bundle and printed by the real CLI, against a
golden file; a training plan's launch on one quoted line; `--json` still the stored document; the MCP
tool plan_show and the dry run's plans carrying the same text.

The golden file is tests/unit/shared/golden/demo-bench-plan.txt. After a deliberate change to the plan or its
rendering, regenerate it with
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/shared/test_plan_view.py -k golden
and review the diff. What differs between machines is normalised first: the bundle root, the interpreter
that serves the cells, and the plan's sha256 (which covers both); the node is pinned by the test.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from contracts import layout
from contracts.campaign import Campaign
from contracts.events import BenchPlanned, TrainingCompleted
from services.bench.planning.staging import plan_bench
from services.cli.main import main
from services.runtime.bundle.bundle import BundleStore
from services.shared.plan_view import plan_lines
from tests.support.cli_runs import restore_logging  # noqa: F401 (autouse fixture)

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).with_name("golden") / "demo-bench-plan.txt"
RUN = "smollm2-20261207-120000-abcdef"
# The trained draft as training.completed names it: a fixed path, so the identity labels wrap alike everywhere.
DRAFT = f"/bundles/{RUN}/training/output"
CELL_SCREEN = 24  # lines: one terminal screen per cell


def _corpus() -> bytes:
    records = [{"id": f"{i:016x}", "messages": [{"role": "user", "content": f"question {i} about the demo"}],
                "reference_completion": None, "input_tokens": 12, "output_tokens": 20, "content_class": "chat",
                "split": "heldout" if i % 2 else "train"} for i in range(12)]
    return b"".join(orjson.dumps(record) + b"\n" for record in records)


@pytest.fixture
def bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BundleStore:
    monkeypatch.setenv("SPECDEC_BUNDLE_ROOT", str(tmp_path / "bundles"))
    return BundleStore(tmp_path / "bundles")


@pytest.fixture
def demo_plan(bundle: BundleStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BundleStore:
    """The demo campaign's bench plan as the bench-runner stores it after training (no process starts)."""
    campaign = Campaign.model_validate(yaml.safe_load((ROOT / "infra/examples/demo-campaign.yaml").read_text()))
    # From an empty folder the target's tokenizer (models/...) is absent wherever the test runs: the planner's
    # documented fallback counts words, so the prompts (and their sha256) are the same on every machine.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("services.bench.planning.staging.socket.gethostname", lambda: "demo-host")
    bundle.write_json(RUN, layout.CAMPAIGN, campaign)
    corpus = bundle.write_bytes(RUN, layout.CORPUS, _corpus())
    done = TrainingCompleted(run_id=RUN, producer="test", output=None, checkpoint_dir=DRAFT, duration_s=1.0,
                             scheduler="local", node="demo-host", corpus=corpus)
    plan_bench(bundle, campaign, done)
    return bundle


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def normalised(out: str, bundle: BundleStore) -> str:
    sha = bundle.ref(RUN, layout.BENCH_PLAN).sha256
    assert f"  sha256: {sha}\n" in out
    return (out.replace(sha, "<sha256 of the stored plan>").replace(str(bundle.root), "<bundle root>")
            .replace(shlex.quote(sys.executable), "python"))


def cell_blocks(out: str) -> dict[str, list[str]]:
    """Each cell's lines: from its `cell ID:` line to the blank line that ends it."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        if line.startswith("  cell "):
            current = blocks.setdefault(line.split()[1].rstrip(":"), [])
        elif not line.strip():
            current = None
        if current is not None:
            current.append(line)
    return blocks


def test_golden_the_demo_bench_plan_reads_one_screen_per_cell(demo_plan, capsys):
    out = cli(capsys, "bench", "plan", RUN)
    stored = demo_plan.read_json(RUN, layout.BENCH_PLAN)
    blocks = cell_blocks(out)
    assert list(blocks) == [cell["cell_id"] for cell in stored["cells"]]
    for cell in stored["cells"]:
        block = blocks[cell["cell_id"]]
        assert len(block) <= CELL_SCREEN, "\n".join(block)
        # The argv launched, exactly, on one line (the one a reviewer copies).
        assert f"  serve (specdec's): {shlex.join(cell['serve_argv'])}" in [line[2:] for line in block]
        assert f"trials: {cell['trials']} per concurrency level; concurrency: 1, 4" in block[1]
    assert "approval: pre-approved by the campaign's policy" in out
    text = normalised(out, demo_plan)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "the plan view changed: regenerate the golden file (module docstring)"


def test_json_still_prints_the_stored_document(demo_plan, capsys):
    out = cli(capsys, "bench", "plan", RUN, "--json")
    assert json.loads(out) == demo_plan.read_json(RUN, layout.BENCH_PLAN)


def test_an_operator_command_shows_what_was_declared_and_each_change_under_it():
    cell = {"cell_id": "c1", "role": "candidate", "regime": "warm", "trials": 2, "concurrency": [8], "node": "n1",
            "identity": {"model": "m"}, "serve_source": "operator",
            "serve_argv": ["python", "-m", "vllm.entrypoints.cli.main", "serve", "m", "--port", "{port}",
                           "--hf-token", "hf_abcdefghijklmnopqrstuvwxyz0123"],
            "declared_serve_argv": ["vllm", "serve", "m", "--port", "8000",
                                    "--hf-token", "hf_abcdefghijklmnopqrstuvwxyz0123"],
            "launch_changes": [{"command": "serve", "position": 4, "declared": "8000", "launched": "{port}",
                                "why": "the port is picked at launch"},
                               {"command": "bench", "position": 9, "declared": None, "launched": "--save-result",
                                "why": "the results are read back"}],
            "bench": ["vllm", "bench", "serve", "--port", "{port}"], "eval": "builtin"}
    lines = plan_lines("bench", {"run_id": RUN, "executor": "local", "cells": [cell],
                                 "launches": [{"cell_id": "c1", "trials": [0, 1]}]})
    at = lines.index("cell c1: candidate, warm, on node n1")
    assert lines[at:at + 11] == [
        "cell c1: candidate, warm, on node n1",
        "  trials: 2 per concurrency level; concurrency: 8",
        "  identity: model=m",
        "  serve (the operator's): python -m vllm.entrypoints.cli.main serve m --port '{port}' --hf-token "
        "'<SECRET:argument>'",
        "    as declared: vllm serve m --port 8000 --hf-token '<SECRET:argument>'",
        "    changed [4]: 8000 -> {port} (the port is picked at launch)",
        "  bench: vllm bench serve --port '{port}'",
        "    changed [9]: (appended) -> --save-result (the results are read back)",
        "  eval: builtin agreement with the standing cell",
        "  launches: #1 of 1 (trials 0, 1)",
        "",
    ]


@pytest.mark.parametrize("scheduler", ["local", "slurm"])
def test_a_training_plan_shows_its_launch_on_one_quoted_line(bundle, capsys, scheduler):
    from tests.unit.trainer_proxy.helpers import campaign
    from tests.unit.trainer_proxy.planning.test_training_plan import ARGV, _plan

    selectors = {"partition": "gpu"} if scheduler == "slurm" else {}
    plan = _plan(campaign(train_argv=ARGV, scheduler=scheduler, selectors=selectors), scheduler=scheduler)
    bundle.write_json(plan.run_id, layout.CAMPAIGN, campaign(train_argv=ARGV))
    bundle.write_json(plan.run_id, layout.TRAINING_PLAN, plan)
    out = cli(capsys, "training", "plan", plan.run_id)
    launched = [line for line in out.splitlines() if line.startswith("  launch (")]
    assert launched == [
        f"  launch ({scheduler}): {shlex.join(plan.launch.argv)}"
    ]  # the literal `a;b $(rm -rf x)` quoted
    if scheduler == "slurm":
        assert f"    submitted as: {shlex.join(plan.launch.sbatch_argv)}" in out
    assert f"specdec training plan {plan.run_id} --json" in out
    assert len(out.splitlines()) <= 30, out


async def test_plan_show_and_the_dry_runs_plans_carry_the_same_view(demo_plan, settings, monkeypatch):
    from mcp import Client

    from services.app.workflow.workflow import plans_of
    from services.mcp.deps import default_deps
    from services.mcp.server import build_server

    ref = demo_plan.ref(RUN, layout.BENCH_PLAN)
    view = "\n".join(plan_lines("bench", demo_plan.read_json(RUN, layout.BENCH_PLAN)))
    async with Client(build_server(default_deps(settings.model_copy(update={"bundle_root": demo_plan.root}),
                                                None))) as client:
        shown = (await client.call_tool("plan_show", {"run_id": RUN, "step": "bench"})).structured_content
    assert shown["sha256"] == ref.sha256
    assert "".join(f"  {line}\n" if line else "\n" for line in view.splitlines()) in shown["text"]
    planned = BenchPlanned(run_id=RUN, producer="test", plan=ref, cells=["standing"], trials=3)
    (dry,) = plans_of(demo_plan, RUN, [planned.model_dump(mode="json", by_alias=True)])
    assert dry.text == view + "\n" and dry.sha256 == ref.sha256


def test_the_reports_review_point_shows_the_plan_it_announced_with_the_same_view(demo_plan):
    from contracts.envelope import ArtifactRef
    from services.publisher.publish.review_record import review_section
    from services.publisher.report.aggregate import read_campaign
    from services.publisher.report.document import Document, to_markdown

    ref = demo_plan.ref(RUN, layout.BENCH_PLAN)
    replaced = ArtifactRef(uri=ref.uri, sha256="c" * 64, size_bytes=10)  # announced, then re-planned over
    for plan in (replaced, ref):
        planned = BenchPlanned(run_id=RUN, producer="test", plan=plan, cells=["standing"], trials=3)
        demo_plan.append_event(RUN, planned.event_id, planned.model_dump_json(by_alias=True).encode())
    data = read_campaign(demo_plan, RUN)
    old, current = data.reviews
    assert old.view == [], "a plan whose bytes were replaced is shown by its hash only"
    assert current.view == plan_lines("bench", demo_plan.read_json(RUN, layout.BENCH_PLAN))
    markdown = to_markdown(Document(title="t", draft_reasons=(), sections=(review_section(data),)), plots_dir="p")
    assert "```\n" + "\n".join(current.view) + "\n```" in markdown
    assert f"as `specdec bench plan {RUN}` shows it" in markdown


def test_an_unlimited_level_is_spelled_as_the_report_spells_it():
    plan = {"run_id": "r", "cells": [{"cell_id": "c", "concurrency": [1, None]}],
            "rounds": {"min_trials": 3, "max_trials": 5, "objective": "tpot", "min_effect_pct": 1,
                       "noise": [{"concurrency": 1, "expected_trials_per_arm": 4},
                                 {"concurrency": None, "expected_trials_per_arm": None}]}}
    text = "\n".join(plan_lines("bench", plan))
    assert "concurrency: 1, unlimited" in text
    assert "c=1: 4, c=unlimited: unknown (no earlier trials)" in " ".join(text.split())
