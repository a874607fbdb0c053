"""The read-back of a cell's k per batch size (num_speculative_tokens_per_batch_size): vLLM 0.32.0's config
line does not state it (its SpeculativeConfig repr names method, model and k), so it is compared with what
the API server received ('non-default args'), and marked unverifiable where the log has no such line. The
log is the real ngram-k3 capture with the schedule added to the --speculative-config it echoes."""

from __future__ import annotations

import json
from pathlib import Path

from services.bench.engine_config import compare, declared_of, effective_config, read_log
from services.bench.plan_types import CellPlan

FIXTURES = Path(__file__).parent / "fixtures" / "vllm-0.32.0"
TARGET = "/work/main/.run/examples/toy-target"
SCHEDULE = [[1, 2, 3], [3, 8, 2]]
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
ECHO = "'speculative_config': {'method': 'ngram', 'num_speculative_tokens': 3, 'prompt_lookup_max': 4, 'prompt_lookup_min': 2}"


def _log(schedule: list[list[int]] | None, *, echo: bool = True) -> str:
    text = (FIXTURES / "ngram-k3.log").read_text()
    assert ECHO in text
    if schedule is not None:
        text = text.replace(ECHO, ECHO[:-1] + f", 'num_speculative_tokens_per_batch_size': {schedule!r}}}")
    if not echo:
        text = "\n".join(line for line in text.splitlines() if "non-default args" not in line)
    return text


def _rows(declared: list[list[int]] | None, log: str) -> dict:
    spec = {**NGRAM, **({"num_speculative_tokens_per_batch_size": declared} if declared else {})}
    plan = CellPlan(
        cell_id="c", role="candidate", regime="warm", trials=1, concurrency=[1], node="n",
        identity={"model": TARGET, "hardware": "cpu", "quantization": "none", "parallelism": "tp=1",
                  "serving_config": {"speculative": spec, "dtype": "auto", "max_num_seqs": None},
                  "workload_shape": "s", "regime": "warm", "graph_mode": "eager", "source_revision": "r",
                  "trial_count": 1},
        speculative_config=spec, serve_argv=["x"], serve_source="operator", bench="builtin", eval="builtin")
    models = json.loads((FIXTURES / "ngram-k3.models.json").read_text())
    effective = effective_config(read_log(log), models)
    return {row.field: row for row in compare(declared_of(plan, max_model_len=512), effective)}


def test_the_schedule_the_server_received_is_checked_against_the_declared_one() -> None:
    row = _rows(SCHEDULE, _log(SCHEDULE))["num_speculative_tokens_per_batch_size"]
    assert row.ok and not row.unverifiable and row.effective == SCHEDULE
    other = _rows(SCHEDULE, _log([[1, 8, 3]]))["num_speculative_tokens_per_batch_size"]
    assert not other.ok and other.effective == [[1, 8, 3]]
    dropped = _rows(SCHEDULE, _log(None))["num_speculative_tokens_per_batch_size"]
    assert not dropped.ok and dropped.effective is None  # a serve command that lost the key fails the cell


def test_without_the_servers_echo_the_schedule_is_unverifiable_not_checked() -> None:
    row = _rows(SCHEDULE, _log(SCHEDULE, echo=False))["num_speculative_tokens_per_batch_size"]
    assert row.ok and row.unverifiable and row.effective is None


def test_a_cell_without_a_schedule_passes_whatever_the_echo() -> None:
    row = _rows(None, _log(None))["num_speculative_tokens_per_batch_size"]
    assert row.ok and row.declared is None
