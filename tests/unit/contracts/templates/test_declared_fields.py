"""Operator serve and bench templates cannot drop a declared field
(contracts/templates/): what fills them, and what `specdec submit` refuses —
each serving field and load field, literal flags that agree or contradict,
placeholders without a value, placeholders a step does not fill, and cells
whose bench commands imply different loads."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts import layout
from contracts.argv import ArgvTemplate
from contracts.campaign import Campaign, LoadSpec, Matrix, ServingConfig
from contracts.templates import bench_values, options, serve_values, template_problems

ROOT = Path(__file__).resolve().parents[4]
SERVER = ["python", "-m", "vllm.entrypoints.openai.api_server"]
# Carries every serving field the example's cells declare (graph_mode eager, max_model_len).
SERVE_OK = [*SERVER, "--model", "{model}", "--max-model-len", "{max_model_len}", "{enforce_eager_flag}",
            "--port", "{port}"]
# Carries every item an operator bench must always get, and the example's non-neutral load fields.
BENCH_OK = ["python", "bench.py", "--base-url", "{base_url}", "--result", "{result_path}",
            "--prompts", "{prompts_path}", "--num-prompts", "{num_prompts}", "--max-concurrency", "{concurrency}",
            "--num-warmups", "{warmup_requests}", "--max-output-tokens", "{max_output_tokens}"]


def example() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())


def problems(data: dict[str, Any]) -> list[str]:
    campaign = Campaign.model_validate(data)
    assert isinstance(campaign.matrix, Matrix), "the example's matrix is inline"
    return template_problems(campaign, campaign.matrix)


def with_serve(argv: list[str], serving: dict[str, Any] | None = None, *, cell: int = 0) -> dict[str, Any]:
    """The example with one cell (the standing one unless told) served by `argv` and declaring `serving`."""
    data = example()
    target = data["matrix"]["cells"][cell]
    target["serving"].update(serving or {})
    target["vllm_sweep"] = {"serve_cmd": argv}
    return data


def one(found: list[str], *words: str) -> str:
    hits = [p for p in found if all(w in p for w in words)]
    assert len(hits) == 1, f"expected one problem with {words} in:\n" + "\n".join(found)
    return hits[0]


# --- the baseline -------------------------------------------------------------------------


def test_the_shipped_example_and_complete_templates_pass():
    assert problems(example()) == []
    data = example()
    data["commands"]["serve"] = {"argv": [*SERVE_OK, "--speculative-config", "{speculative_config_json}"]}
    data["commands"]["bench"] = {"argv": BENCH_OK}
    assert problems(data) == []


# --- serve: each declared field -------------------------------------------------------------


@pytest.mark.parametrize(
    ("serving", "field", "placeholder", "carried"),
    [
        ({"dtype": "bfloat16"}, "serving.dtype = bfloat16", '"--dtype", "{dtype}"', ["--dtype", "{dtype}"]),
        (
            {"quantization": "fp8"},
            "serving.quantization = fp8",
            '"--quantization", "{quantization}"',
            ["{quantization_flag}"],
        ),
        (
            {"tensor_parallel_size": 2},
            "serving.tensor_parallel_size = 2",
            '"--tensor-parallel-size", "{tensor_parallel_size}"',
            ["-tp", "{tensor_parallel_size}"],
        ),
        (
            {"max_num_seqs": 8},
            "serving.max_num_seqs = 8",
            '"--max-num-seqs", "{max_num_seqs}"',
            ["{max_num_seqs_flag}"],
        ),
        ({"model": "models/other"}, "serving.model = models/other", '"--model", "{model}"', ["--model", "{model}"]),
        (
            {"speculative": {"method": "ngram", "num_speculative_tokens": 3}},
            "serving.speculative = ngram k=3",
            '"--speculative-config", "{speculative_config_json}"',
            ["{speculative_config_flag}"],
        ),
    ],
)
def test_a_declared_serving_field_needs_its_placeholder(serving, field, placeholder, carried):
    bare = [*SERVER, "--max-model-len", "{max_model_len}", "{enforce_eager_flag}", "--port", "{port}"]
    found = one(problems(with_serve(bare, serving)), field)
    assert found.startswith("cell standing: its serve command (matrix.cells[0].vllm_sweep.serve_cmd)")
    assert f"add {placeholder}" in found
    assert problems(with_serve([*bare, *carried], serving)) == []


def test_graph_mode_eager_needs_the_flag_placeholder_or_the_literal_flag():
    bare = [*SERVER, "--max-model-len", "{max_model_len}", "--port", "{port}"]
    found = one(problems(with_serve(bare)), "serving.graph_mode = eager")
    assert 'add "{enforce_eager_flag}"' in found and "--enforce-eager" in found
    assert problems(with_serve([*bare, "{enforce_eager_flag}"])) == []
    assert problems(with_serve([*bare, "--enforce-eager"])) == []


def test_graph_mode_graph_needs_nothing_and_refuses_a_literal_enforce_eager():
    data = with_serve([*SERVER, "--max-model-len", "{max_model_len}", "{enforce_eager_flag}"])
    for cell in data["matrix"]["cells"]:
        cell["serving"]["graph_mode"] = "graph"
    assert problems(data) == []
    data["matrix"]["cells"][0]["vllm_sweep"]["serve_cmd"] = [*SERVER, "--max-model-len", "{max_model_len}",
                                                             "--enforce-eager"]
    found = one(problems(data), "passes --enforce-eager")
    assert "serving.graph_mode = graph" in found


def test_a_literal_no_enforce_eager_contradicts_eager():
    found = problems(with_serve([*SERVER, "--max-model-len", "{max_model_len}", "{enforce_eager_flag}",
                                 "--no-enforce-eager"]))
    assert "passes --no-enforce-eager but the cell declares serving.graph_mode = eager" in one(found, "no-enforce")


def test_max_model_len_is_always_carried():
    found = one(problems(with_serve([*SERVER, "{enforce_eager_flag}"])), "target.max_model_len = 512")
    assert 'add "--max-model-len", "{max_model_len}"' in found
    assert problems(with_serve([*SERVER, "{enforce_eager_flag}", "--max-model-len=512"])) == []


# --- serve: literal flags ------------------------------------------------------------------

BASE = [*SERVER, "--max-model-len", "{max_model_len}", "{enforce_eager_flag}"]


@pytest.mark.parametrize(("serving", "literal"), [
    ({"max_num_seqs": 8}, ["--max-num-seqs", "8"]),
    ({"max_num_seqs": 8}, ["--max-num-seqs=8"]),
    ({"dtype": "float16"}, ["--dtype", "half"]),
    ({"quantization": "fp8"}, ["-q", "fp8"]),
    ({"tensor_parallel_size": 2}, ["--tensor-parallel-size=2"]),
    ({}, ["--tensor-parallel-size", "1"]),
    ({}, ["--dtype", "auto"]),
])
def test_a_literal_flag_with_the_declared_value_counts(serving, literal):
    assert problems(with_serve([*BASE, *literal], serving)) == []


@pytest.mark.parametrize(("serving", "literal", "passed", "declared"), [
    ({"max_num_seqs": 8}, ["--max-num-seqs", "16"], "--max-num-seqs 16", "serving.max_num_seqs = 8"),
    ({"max_num_seqs": 8}, ["--max-num-seqs=eight"], "--max-num-seqs eight", "serving.max_num_seqs = 8"),
    ({}, ["--max-num-seqs", "8"], "--max-num-seqs 8", "serving.max_num_seqs = unset"),
    ({"dtype": "bfloat16"}, ["--dtype", "float32"], "--dtype float32", "serving.dtype = bfloat16"),
    ({}, ["--dtype", "float16"], "--dtype float16", "serving.dtype = auto"),
    ({}, ["-q", "awq"], "-q awq", "serving.quantization = none"),
    ({"tensor_parallel_size": 2}, ["-tp", "4"], "-tp 4", "serving.tensor_parallel_size = 2"),
    ({}, ["--max-model-len", "1024"], "--max-model-len 1024", "target.max_model_len = 512"),
])
def test_a_literal_flag_with_another_value_is_refused_naming_both(serving, literal, passed, declared):
    found = one(problems(with_serve([*BASE, *literal], serving)), passed)
    assert f"passes {passed} but the cell declares {declared}" in found


def test_a_literal_speculative_config_is_refused_even_when_it_looks_right():
    spec = {"method": "ngram", "num_speculative_tokens": 3}
    literal = json.dumps(spec).replace("{", "{{").replace("}", "}}")  # literal braces in an argv template
    found = problems(with_serve([*BASE, "--speculative-config", literal], {"speculative": spec}))
    assert "cannot be checked against the declared one" in one(found, "passes --speculative-config")
    assert json.dumps(spec) in one(found, "passes --speculative-config")
    # A cell without speculation may not pass one either.
    assert one(problems(with_serve([*BASE, "-sc", literal], {"speculative": None})), "serving.speculative = none")


def test_a_value_placeholder_of_an_unset_field_is_refused():
    found = one(problems(with_serve([*BASE, "--max-num-seqs", "{max_num_seqs}"])), "{max_num_seqs} but")
    assert "serving.max_num_seqs is unset" in found and '"{max_num_seqs_flag}"' in found
    # The flag form renders nothing when unset: accepted.
    assert problems(with_serve([*BASE, "{max_num_seqs_flag}"])) == []


def test_a_placeholder_the_serve_step_does_not_fill_is_refused():
    found = one(problems(with_serve([*BASE, "{corpus}"])), "{corpus}")
    assert "which a serve command is not given" in found and "{max_num_seqs}" in found


def test_a_shared_serve_template_names_every_cell_it_fails_for_once():
    data = example()
    data["commands"]["serve"] = {"argv": [*SERVER, "--port", "{port}"]}
    found = problems(data)
    eager = one(found, "serving.graph_mode")
    assert eager.startswith("cells standing, ngram-k3, draft-k3: their serve command (commands.serve.argv)")
    assert one(found, "serving.speculative = ngram k=3").startswith("cell ngram-k3: its serve command")
    assert one(found, "serving.speculative = draft_model k=3").startswith("cell draft-k3: its serve command")


def test_the_issue_case_a_template_without_eager_and_max_num_seqs():
    """#13 as a new user met it: the cell declares eager and 8, the template carries neither."""
    data = with_serve([*SERVER, "--model", "{model}", "--max-model-len", "{max_model_len}", "--port", "{port}",
                       "--speculative-config", "{speculative_config_json}"], {"graph_mode": "eager", "max_num_seqs": 8})
    found = problems(data)
    assert len(found) == 2
    assert '"{enforce_eager_flag}"' in one(found, "serving.graph_mode = eager")
    assert '"--max-num-seqs", "{max_num_seqs}"' in one(found, "serving.max_num_seqs = 8")


def test_a_matrix_file_names_its_cells_by_the_file():
    data = with_serve([*SERVER, "--max-model-len", "{max_model_len}"])
    campaign = Campaign.model_validate(data)
    found = template_problems(campaign, campaign.matrix, cells_at="m.yaml: cells")
    assert "(m.yaml: cells[0].vllm_sweep.serve_cmd)" in one(found, "graph_mode")


# --- bench: the load -----------------------------------------------------------------------


def with_bench(
    argv: list[str], load: dict[str, Any] | None = None, concurrency: list[int] | None = None
) -> dict[str, Any]:
    data = example()
    data["commands"]["bench"] = {"argv": argv}
    data["matrix"]["load"].update(load or {})
    for cell in data["matrix"]["cells"]:
        cell["concurrency"] = concurrency or cell["concurrency"]
    return data


def without(*placeholders: str) -> list[str]:
    argv = list(BENCH_OK)
    for name in placeholders:
        i = argv.index("{" + name + "}")
        del argv[i - 1:i + 1]
    return argv


@pytest.mark.parametrize(("name", "named", "add"), [
    ("base_url", "{base_url}", '"{base_url}" (or "{port}")'),
    ("result_path", "{result_path}", '"{result_path}"'),
    ("prompts_path", "{prompts_path}", '"{prompts_path}"'),
    ("num_prompts", "matrix.load.num_prompts = 32", '"--num-prompts", "{num_prompts}"'),
    ("concurrency", "matrix.cells[].concurrency = [1, 4]", '"--max-concurrency", "{concurrency}"'),
    ("warmup_requests", "matrix.load.warmup_requests = 4", '"--num-warmups", "{warmup_requests}"'),
    ("max_output_tokens", "matrix.load.max_output_tokens = 64", '"--max-output-tokens", "{max_output_tokens}"'),
])
def test_a_bench_template_must_carry_the_always_items_and_non_neutral_fields(name, named, add):
    found = one(problems(with_bench(without(name))), named)
    assert found.startswith("cells standing, ngram-k3, draft-k3: their bench command (commands.bench.argv)")
    assert f"add {add}" in found


@pytest.mark.parametrize(("load", "named", "carried"), [
    ({"endpoint": "chat"}, "matrix.load.endpoint = chat", ["--endpoint", "{endpoint}"]),
    ({"request_rate": 4.0}, "matrix.load.request_rate = 4", ["--request-rate", "{request_rate}"]),
    ({"ignore_eos": True}, "matrix.load.ignore_eos = true", ["{ignore_eos_flag}"]),
])
def test_a_load_field_off_its_neutral_value_needs_its_placeholder(load, named, carried):
    assert "add" in one(problems(with_bench(BENCH_OK, load)), named)
    assert problems(with_bench([*BENCH_OK, *carried], load)) == []


def test_burstiness_is_carried_once_a_rate_makes_it_matter():
    rate = ["--request-rate", "{request_rate}"]
    assert problems(with_bench([*BENCH_OK, *rate], {"request_rate": 2.0, "burstiness": 1.0})) == []
    assert one(problems(with_bench([*BENCH_OK, *rate], {"request_rate": 2.0, "burstiness": 0.5})),
               "matrix.load.burstiness = 0.5")
    assert problems(with_bench([*BENCH_OK, *rate, "--burstiness", "{burstiness}"],
                               {"request_rate": 2.0, "burstiness": 0.5})) == []


def test_neutral_load_values_need_not_be_carried():
    argv = without("warmup_requests", "max_output_tokens")
    assert problems(with_bench(argv, {"warmup_requests": 0, "max_output_tokens": None})) == []


def test_bench_literals_count_only_with_the_declared_value():
    argv = [*without("num_prompts", "concurrency"), "--num-prompts", "32", "--max-concurrency", "4"]
    assert problems(with_bench(argv, concurrency=[4])) == []
    found = problems(with_bench(argv, {"num_prompts": 8}, concurrency=[4]))
    assert "passes --num-prompts 32 but the cell declares matrix.load.num_prompts = 8" in one(found, "--num-prompts")
    found = problems(with_bench(argv))  # concurrency [1, 4]: one literal cannot carry two levels
    assert "concurrency levels [1, 4]" in one(found, "passes --max-concurrency 4")
    assert problems(with_bench([*BENCH_OK, "--request-rate", "inf"])) == []
    assert one(problems(with_bench([*BENCH_OK, "--ignore-eos"])), "passes --ignore-eos")


def on_shapes(data: dict[str, Any]) -> dict[str, Any]:
    data["traffic"] = {"shapes": ["short", "medium"]}
    data["commands"].pop("train")
    data["source_revisions"].pop("trainer")  # refused with shapes: nothing is trained
    data["matrix"]["cells"] = data["matrix"]["cells"][:2]
    return data


@pytest.mark.parametrize(("written", "literal", "refusal"), [
    (None, "--ignore-eos", None),  # unset on shapes is true, as every prompt in the prompts file says
    (None, None, None),  # unset: each prompt's own value in the prompts file carries it
    (None, "--no-ignore-eos", "passes --no-ignore-eos but the cell declares matrix.load.ignore_eos = true"),
    (False, "--ignore-eos", "passes --ignore-eos but the cell declares matrix.load.ignore_eos = false"),
    (False, None, None),  # false is the neutral value a bench assumes untold
    (True, None, "matrix.load.ignore_eos = true: add"),  # written true: the template must carry it
])
def test_a_shapes_bench_template_is_checked_against_the_ignore_eos_sent(written, literal, refusal):
    data = on_shapes(with_bench([*BENCH_OK, *([literal] if literal else [])], {"ignore_eos": written}))
    found = problems(data)
    if refusal is None:
        assert found == []
    else:
        assert refusal in one(found, "ignore_eos")


def test_max_output_tokens_placeholder_without_a_value_is_refused():
    found = problems(with_bench(BENCH_OK, {"max_output_tokens": None}))
    assert "matrix.load.max_output_tokens is unset" in one(found, "{max_output_tokens} but")


def test_a_placeholder_the_bench_step_does_not_fill_is_refused():
    assert "which a bench command is not given" in one(problems(with_bench([*BENCH_OK, "{corpus_train}"])),
                                                          "{corpus_train}")


# --- bench: one load for every cell ----------------------------------------------------------


def test_builtin_and_operator_bench_cells_are_refused():
    data = example()
    data["matrix"]["cells"][1]["vllm_sweep"] = {"bench_cmd": BENCH_OK}
    found = one(problems(data), "builtin load generator")
    assert "cells ['standing', 'draft-k3']" in found and "['ngram-k3']" in found


def test_bench_templates_with_different_literal_load_flags_are_refused():
    data = with_bench(BENCH_OK)
    data["matrix"]["cells"][2]["vllm_sweep"] = {"bench_cmd": [*BENCH_OK, "--dataset-name", "random"]}
    data["matrix"]["cells"][1]["vllm_sweep"] = {"bench_cmd": [*BENCH_OK, "--dataset-name", "sharegpt"]}
    found = one(problems(data), "different loads")
    assert "--dataset-name (standing: absent; ngram-k3: sharegpt; draft-k3: random)" in found


def test_bench_templates_that_differ_only_in_program_or_placeholders_agree():
    data = with_bench(BENCH_OK)
    data["matrix"]["cells"][1]["vllm_sweep"] = {"bench_cmd": ["/opt/other/bench.py", *BENCH_OK[1:]]}
    assert problems(data) == []


def test_options_reads_flags_values_and_switches():
    assert options(["b", "--a", "1", "--b=2", "--c", "--d", "-1", "pos"]) == {
        "--a": ["1"], "--b": ["2"], "--c": [None], "--d": ["-1"]}


# --- what fills the templates ----------------------------------------------------------------


def test_serve_values_render_every_declared_field_and_flags_without_empty_tokens():
    template = ArgvTemplate([*SERVER, "--dtype", "{dtype}", "{quantization_flag}", "-tp", "{tensor_parallel_size}",
                             "{enforce_eager_flag}", "{max_num_seqs_flag}", "--max-model-len", "{max_model_len}",
                             "{speculative_config_flag}"])
    spec = {"method": "ngram", "num_speculative_tokens": 3}
    declared = ServingConfig(dtype="bfloat16", quantization="fp8", tensor_parallel_size=2, graph_mode="eager",
                             max_num_seqs=8)
    argv = template.render(serve_values(declared, model="m", max_model_len=512, speculative=spec))
    assert argv[3:] == ["--dtype", "bfloat16", "--quantization=fp8", "-tp", "2", "--enforce-eager", "--max-num-seqs=8",
                        "--max-model-len", "512", "--speculative-config=" + json.dumps(spec, sort_keys=True)]
    plain = template.render(serve_values(ServingConfig(graph_mode="graph"), model="m", max_model_len=512,
                                         speculative=None))
    assert plain[3:] == ["--dtype", "auto", "-tp", "1", "--max-model-len", "512"]
    assert "" not in plain


def test_vllm_parses_the_flag_forms_as_the_declared_values():
    pytest.importorskip("vllm")
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    values = serve_values(ServingConfig(quantization="fp8", max_num_seqs=8, graph_mode="eager"), model="m",
                          max_model_len=512, speculative=spec)
    argv = ["--model", "m", *(values[name] for name in ("quantization_flag", "enforce_eager_flag", "max_num_seqs_flag",
                                                        "speculative_config_flag"))]
    args = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser()).parse_args(argv)
    assert (args.quantization, args.enforce_eager, args.max_num_seqs, args.speculative_config) == ("fp8", True, 8, spec)


def test_bench_values_render_the_load():
    # (a burstiness needs a request rate: LoadSpec refuses one without it)
    load = LoadSpec(endpoint="chat", num_prompts=8, warmup_requests=2, request_rate=None, burstiness=1.0,
                    max_output_tokens=None, ignore_eos=True)
    values = bench_values(load, concurrency=4, base_url="http://10.0.0.2:8123", result_path="/r.json",
                          prompts_path="/p.jsonl")
    assert values["endpoint"] == "/v1/chat/completions" and values["request_rate"] == "inf"
    assert (values["host"], values["port"], values["concurrency"]) == ("10.0.0.2", "8123", "4")
    assert values["ignore_eos_flag"] == "--ignore-eos" and values["burstiness"] == "1.0"
    assert "max_output_tokens" not in values
    rated = bench_values(LoadSpec(request_rate=2, burstiness=0.5, max_output_tokens=16), concurrency=1,
                         base_url="http://h:1", result_path="r", prompts_path="p")
    assert (rated["request_rate"], rated["burstiness"]) == ("2.0", "0.5")


def test_the_bench_plan_renders_an_operator_serve_template_with_the_declared_fields():
    from services.bench.planning.builder import build_plan

    data = with_serve([*SERVE_OK, "{max_num_seqs_flag}", "{quantization_flag}", "--dtype", "{dtype}"],
                      {"max_num_seqs": 8, "dtype": "bfloat16"}, cell=0)
    campaign = Campaign.model_validate(data)
    plan = build_plan(campaign, campaign.matrix, run_id="toy-20261130-010101-abcdef", default_node="n",
                      training_output="/drafts/d", prompts={"source": layout.BENCH_PROMPTS})
    argv = plan.cells[0].serve_argv
    assert argv[len(SERVER):] == ["--model", "models/toy-target", "--max-model-len", "512", "--enforce-eager",
                                  "--port", "{port}", "--max-num-seqs=8", "--dtype", "bfloat16"]


def test_the_operator_bench_gets_every_load_field_and_the_plans_prompts(tmp_path):
    """`_operator_bench` renders the template per window; a real process records what it got."""
    from services.bench.planning.builder import build_plan
    from services.bench.run import BenchRun
    from services.runtime.bundle.bundle import BundleStore

    script = tmp_path / "bench.py"
    script.write_text("import json, sys\nout = sys.argv[sys.argv.index('--result') + 1]\n"
                      "json.dump({'argv': sys.argv[1:], 'completed': 1, 'failed': 0}, open(out, 'w'))\n")
    argv = [sys.executable, str(script), *BENCH_OK[2:], "--endpoint", "{endpoint}", "--request-rate", "{request_rate}",
            "{ignore_eos_flag}", "--model", "{model}"]
    data = with_bench(argv, {"ignore_eos": True})
    campaign = Campaign.model_validate(data)
    run_id = "toy-20261130-010101-abcdef"
    plan = build_plan(campaign, campaign.matrix, run_id=run_id, default_node="n", training_output="/drafts/d",
                      prompts={"source": layout.BENCH_PROMPTS})
    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    run = BenchRun(plan, bundle, [], emit=None, recheck=None, event_factory=None,
                   eval_values={"model": "standing-model", "tokenizer": "tok"})
    cell = plan.cells[1]
    result, _, _ = asyncio.run(
        run._operator_bench(cell, "http://127.0.0.1:9", "bench/x/trial-0", trial=0, concurrency=4)
    )
    got = dict(zip(result["argv"][::2], result["argv"][1::2], strict=False))
    assert got["--base-url"] == "http://127.0.0.1:9" and got["--max-concurrency"] == "4"
    assert got["--prompts"] == str((tmp_path / "bundles" / run_id / layout.BENCH_PROMPTS).absolute())
    assert (got["--num-prompts"], got["--num-warmups"], got["--max-output-tokens"]) == ("32", "4", "64")
    assert (got["--endpoint"], got["--request-rate"]) == ("/v1/completions", "inf")
    assert "--ignore-eos" in result["argv"] and "" not in result["argv"]
    assert result["argv"][result["argv"].index("--model") + 1] == cell.identity["model"]


def test_the_placeholders_submit_allows_are_exactly_what_the_steps_fill():
    """A placeholder submit lets through must have a value when the step renders it."""
    from contracts.templates import BENCH_PLACEHOLDERS, SERVE_PLACEHOLDERS
    from services.bench.planning.builder import _operator_values

    data = example()
    data["matrix"]["cells"][0]["serving"]["max_num_seqs"] = 8
    campaign = Campaign.model_validate(data)
    serve = _operator_values(
        campaign, campaign.matrix.cells[0], "r", None, training_output="/drafts/d", host="127.0.0.1"
    )
    assert set(serve) == SERVE_PLACEHOLDERS
    window = bench_values(LoadSpec(max_output_tokens=8), concurrency=1, base_url="http://h:1", result_path="r",
                          prompts_path="p")
    # run_id and the cell's model come from the run; the tokenizer from the runner's values (execution.py).
    assert set(window) | {"run_id", "model", "tokenizer"} == BENCH_PLACEHOLDERS


def test_the_configuration_doc_lists_every_placeholder():
    from contracts.argv import PLACEHOLDERS

    text = (ROOT / "docs/configuration.md").read_text()
    table = text[text.index("### Placeholders"):text.index("### What `specdec submit` refuses")]
    missing = [name for name in PLACEHOLDERS if f"`{{{name}}}`" not in table]
    assert missing == [], f"docs/configuration.md's placeholder table lacks {missing}"


def test_client_processes_beside_an_operator_bench_is_refused_naming_the_field():
    found = problems(with_bench(BENCH_OK, {"client_processes": 2}, concurrency=[2, 4]))
    assert "drives its own load and never reads it" in one(found, "matrix.load.client_processes 2")
    assert problems(with_bench(BENCH_OK, {"client_processes": 1})) == []
