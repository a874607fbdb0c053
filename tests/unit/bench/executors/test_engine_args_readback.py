"""The read-back of what a canonical cell's `vllm serve` command declares beyond specdec's typed keys: prefix
caching and the kv-cache dtype from the engine's own config line, max_num_batched_tokens from the engine's lines
or what the API server received. A declared value the engine states nowhere is unverifiable, never checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contracts.artifacts.engine import EngineCheck, FieldCheck
from services.bench.executors.engine_compare import declared_of, engine_check, mismatch_reason
from services.bench.executors.engine_log import effective_config, read_log
from services.bench.planning.model import CellPlan

FIXTURES = Path(__file__).parent / "fixtures" / "vllm-0.32.0"
TARGET = "/work/main/.run/examples/toy-target"


def fixture_text(name: str) -> tuple[str, dict]:
    return (FIXTURES / f"{name}.log").read_text(), json.loads((FIXTURES / f"{name}.models.json").read_text())


def cell(args: dict[str, Any] | None) -> CellPlan:
    return CellPlan(
        cell_id="c", role="candidate", regime="warm", trials=1, concurrency=[1], node="n",
        identity={"model": TARGET, "hardware": "cpu", "quantization": "none", "parallelism": "tp=1",
                  "serving_config": {"speculative": None, "dtype": "auto", "max_num_seqs": None},
                  "workload_shape": "s", "regime": "warm", "graph_mode": "eager", "source_revision": "r",
                  "trial_count": 1},
        speculative_config=None, serve_argv=["x"], serve_source="operator", bench="builtin", eval="builtin",
        declared_engine_args=args)


def rows(args: dict[str, Any] | None, text: str, models: dict | None) -> tuple[dict[str, FieldCheck], EngineCheck]:
    check = engine_check("c", 0, declared_of(cell(args), max_model_len=512), effective_config(read_log(text), models))
    return {row.field: row for row in check.checks}, check


def test_the_engine_states_prefix_caching_and_the_kv_cache_dtype_on_its_config_line():
    text, models = fixture_text("eager-no-spec")
    effective = effective_config(read_log(text), models)
    assert effective.enable_prefix_caching is True and effective.kv_cache_dtype == "auto"
    # Not passed: the API server's 'non-default args' line names no max_num_batched_tokens.
    assert effective.max_num_batched_tokens is None
    assert any(s.startswith("max_num_batched_tokens: not passed to vLLM") for s in effective.sources)
    found, check = rows(None, text, models)
    assert not check.mismatches and not any(row.unverifiable for row in check.checks)


def test_declared_values_the_engine_runs_pass_and_others_fail_naming_them():
    text, models = fixture_text("eager-no-spec")
    found, check = rows({"enable_prefix_caching": True, "kv_cache_dtype": "auto"}, text, models)
    assert found["enable_prefix_caching"].ok and found["kv_cache_dtype"].ok
    found, check = rows({"enable_prefix_caching": False, "kv_cache_dtype": "fp8"}, text, models)
    assert [row.field for row in check.mismatches] == ["enable_prefix_caching", "kv_cache_dtype"]
    reason = mismatch_reason(check)
    assert "enable_prefix_caching: declared False, effective True" in reason
    assert "kv_cache_dtype: declared 'fp8', effective 'auto'" in reason


def test_max_num_batched_tokens_is_read_from_what_the_api_server_received():
    text, models = fixture_text("eager-no-spec")
    passed = text.replace("'enforce_eager': True}", "'enforce_eager': True, 'max_num_batched_tokens': 256}")
    found, check = rows({"max_num_batched_tokens": 256}, passed, models)
    assert found["max_num_batched_tokens"].ok and found["max_num_batched_tokens"].effective == 256
    # A wrapper that drops it: the server received none, so the engine runs its own default.
    found, check = rows({"max_num_batched_tokens": 256}, text, models)
    assert [row.field for row in check.mismatches] == ["max_num_batched_tokens"]
    assert "max_num_batched_tokens: declared 256, effective not passed to vLLM" in mismatch_reason(check)


def test_the_engine_s_own_resolved_value_wins_over_what_it_received():
    text, models = fixture_text("debug-default-max-num-seqs")
    found, _ = rows({"max_num_batched_tokens": 256}, text, models)
    assert found["max_num_batched_tokens"].effective == 2048 and not found["max_num_batched_tokens"].ok
    text += "\n(EngineCore pid=2) INFO 12-01 13:39:12 [config/scheduler.py:308] Chunked prefill is enabled with " \
            "max_num_batched_tokens=256.\n"
    found, _ = rows({"max_num_batched_tokens": 256}, text, models)
    assert found["max_num_batched_tokens"].ok and found["max_num_batched_tokens"].effective == 256


def test_a_declared_value_the_engine_states_nowhere_is_unverifiable_not_checked():
    text, models = fixture_text("eager-no-spec")
    silent = "\n".join(line for line in text.splitlines()
                       if "non-default args" not in line and "Initializing a V1" not in line)
    found, check = rows({"enable_prefix_caching": False, "max_num_batched_tokens": 256, "kv_cache_dtype": "fp8"},
                        silent, models)
    for name in ("enable_prefix_caching", "max_num_batched_tokens", "kv_cache_dtype"):
        assert found[name].unverifiable and found[name].effective is None, found[name]
    # Not declared: nothing to verify.
    found, _ = rows(None, silent, models)
    assert not any(found[name].unverifiable for name in ("enable_prefix_caching", "max_num_batched_tokens"))
