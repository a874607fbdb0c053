"""Example operator trainer: an EAGLE-3 head for the target, in `speculators`' own format, on CPU.

    $(infra/bin/ensure-speculators-env) infra/examples/train_eagle3.py \\
        --corpus corpus-train.jsonl --target models/toy-target --out head/ [--heldout corpus-heldout.jsonl]

An EAGLE-3 head is what inference teams train with vLLM's training library,
`speculators`; vLLM serves its checkpoints as `{"method": "eagle3", "model": OUT}`.
`speculators train` needs an accelerator (it asks `torch.accelerator` for one), and
its hidden-state generation runs through vLLM's GPU path, so on a CPU machine this
script does the same work with `speculators`' own parts and transformers. It runs in
its own environment (`infra/bin/ensure-speculators-env`: speculators pins its own
transformers range), as the trainer-proxy runs any operator's trainer (an argv,
`{corpus_train}`, `{target}`, `{output_dir}`; docs/trainer-proxy.md).

What it does:
1. reads the corpus's `train` records (the same reader as train_draft.py's) and lets
   the target answer each prompt greedily: the assistant turns come from the target,
   so the data is on-policy (what the head must predict is what the target says);
2. runs the target (transformers) over prompt + answer with `output_hidden_states`
   and keeps what `speculators`' data pipeline keeps: the auxiliary hidden states of
   the layers the head's config names (`eagle_aux_hidden_state_layer_ids`,
   concatenated) and the last layer's output before the final norm (the verifier's
   logits are recomputed from it as the distillation target); then `speculators`'
   own `shift_batch` aligns them;
3. builds the head the way `speculators train` builds it (`create_transformer_layer_config`,
   `Eagle3DraftModel.from_training_args`: a Llama decoder layer, the verifier's
   embeddings, norm and lm_head loaded from the target; its CLI defaults for eagle3:
   norm_before_residual, norm_before_fc, norm_output, KL loss), with two CPU choices:
   `sdpa` attention (flex attention's compiled kernels are GPU-only) and full
   attention in every draft layer (the CLI's sliding window of 2048 is longer than
   any sequence here, so the result is the same and vLLM's path is the plain one);
4. trains it with AdamW on packed rows (`--token-budget` tokens, documents kept apart
   by `speculators`' block mask), unrolled over `--ttt-steps` steps as `speculators`
   does (test-time training), and prints one JSON line per step on stdout:
   `{"step": n, "total": steps, "loss": x, "acc": [per-position accuracy]}` (the trainer-proxy reads `loss`,
   and relays step, total and loss as progress: the campaign declares commands.train.progress format json);
5. saves it with `speculators`' checkpoint writer (`save_pretrained`: config.json with
   `speculators_config` and `speculators_version`, model.safetensors), in bfloat16 as
   `speculators train` saves, and writes `train-summary.json` beside it with the
   argv, versions and figures;
6. with `--heldout`: estimates the head's acceptance offline (offline_estimate below, counted
   and written by offline_acceptance.py's one definition: `offline-acceptance.json`);
   eagle3_acceptance.py runs the same estimate on a head saved earlier.

The corpus readers and the target's answers are trainer_data.py's (the same code as
train_draft.py's); run as a script, Python finds these neighbours in the script's own folder.
Both, and offline_acceptance.py, import only the standard library at module level, so this
runs in `.venv-speculators` as in `.venv`.

A summary JSON line (`{"event": "summary", ...}`) closes stdout; progress goes to stderr.
Exit 2 with one line on stderr when the inputs cannot be used.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

from offline_acceptance import accepted_counts, report, write  # one definition for every trainer
from trainer_data import ExampleError, read_heldout, read_train_split, target_answers

SUMMARY_FILE = "train-summary.json"


class TrainEagle3Error(ExampleError):
    """The head cannot be trained from these inputs; the message says what to change."""


def log(message: str) -> None:
    print(f"train_eagle3: {message}", file=sys.stderr, flush=True)


def default_aux_layers(num_layers: int) -> list[int]:
    """`speculators`' (and vLLM's) default [2, n//2, n-3], or [1, n//2, n-1] where the target is too shallow
    for three distinct ids that way (the toy target has 4 layers: [1, 2, 3]). Ids name the input of a target
    layer, 0 to n-1: vLLM captures aux states inside its layer loop."""
    for ids in ([2, num_layers // 2, num_layers - 3], [1, num_layers // 2, num_layers - 1]):
        if len(set(ids)) == 3 and min(ids) >= 1 and max(ids) < num_layers:
            return ids
    raise TrainEagle3Error(f"the target has {num_layers} layers; EAGLE-3 needs three distinct auxiliary layers")


def parse_layers(text: str | None, num_layers: int) -> list[int]:
    if text is None:
        return default_aux_layers(num_layers)
    try:
        ids = [int(x) for x in text.split(",")]
    except ValueError:
        raise TrainEagle3Error(f"--aux-layers {text!r}: give comma-separated layer ids, e.g. 1,2,3") from None
    if len(ids) != 3 or len(set(ids)) != 3 or min(ids) < 0 or max(ids) >= num_layers or ids != sorted(ids):
        raise TrainEagle3Error(f"--aux-layers {text!r}: three distinct ascending ids within [0, {num_layers - 1}] "
                               "(vLLM concatenates them in ascending order)")
    return ids


def hidden_features(target, pairs, aux_layers: list[int], batch_size: int) -> list[dict]:
    """Per (prompt, answer): `speculators`' sample dict, shifted by its own `shift_batch`.

    Right padding leaves the real positions' hidden states untouched (causal attention).
    `hidden_states[i]` of transformers is the input of layer i, which is what vLLM's
    aux layer id i names; the last layer's pre-norm output is the final norm's input."""
    import torch
    from speculators.models.eagle3.data import shift_batch

    captured: dict[str, torch.Tensor] = {}
    hook = target.model.norm.register_forward_hook(lambda _m, args, _out: captured.__setitem__("last", args[0]))
    samples = []
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
    try:
        with torch.inference_mode():
            for first in range(0, len(order), batch_size):
                chunk = [pairs[i] for i in order[first : first + batch_size]]
                width = max(len(p) + len(a) for p, a in chunk)
                ids = torch.zeros((len(chunk), width), dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for row, (prompt, answer) in enumerate(chunk):
                    ids[row, : len(prompt) + len(answer)] = torch.tensor(prompt + answer)
                    mask[row, : len(prompt) + len(answer)] = 1
                out = target.model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
                aux = torch.cat([out.hidden_states[i] for i in aux_layers], dim=-1)
                for row, (prompt, answer) in enumerate(chunk):
                    n = len(prompt) + len(answer)
                    # Loss on the positions whose token is an answer token with a next answer token to predict.
                    loss_mask = torch.zeros(n, dtype=torch.long)
                    loss_mask[len(prompt) : n - 1] = 1
                    samples.append(shift_batch({
                        "input_ids": ids[row, :n].clone(), "hidden_states": aux[row, :n].clone(),
                        "verifier_last_hidden_states": captured["last"][row, :n].clone(), "loss_mask": loss_mask,
                        "lengths": torch.tensor([n]), "position_ids": torch.arange(n),
                    }))
    finally:
        hook.remove()
    return samples


def pack(samples: list[dict], budget: int, rng: random.Random | None) -> list[dict]:
    """Rows of at most `budget` tokens (a longer sample is a row of its own), as `speculators`' collate
    builds them: one sequence, `document_ids` keeping the samples apart."""
    import torch

    order = list(range(len(samples)))
    if rng is not None:
        rng.shuffle(order)
    rows: list[list[dict]] = []
    current: list[dict] = []
    used = 0
    for i in order:
        n = samples[i]["input_ids"].shape[0]
        if current and used + n > budget:
            rows.append(current)
            current, used = [], 0
        current.append(samples[i])
        used += n
    if current:
        rows.append(current)
    batches = []
    for row in rows:
        cat = {key: torch.cat([s[key] for s in row]).unsqueeze(0)
               for key in ("input_ids", "hidden_states", "verifier_last_hidden_states", "loss_mask", "position_ids")}
        lengths = torch.tensor([s["input_ids"].shape[0] for s in row])
        cat["document_ids"] = torch.repeat_interleave(torch.arange(len(row)), lengths).unsqueeze(0)
        cat["loss_mask"] = cat["loss_mask"].bool()
        batches.append(cat)
    return batches


def vocab_mapping(pairs, draft_vocab: int | None, target_vocab: int):
    """(d2t, t2d) for a reduced draft vocabulary, or (None, None) for the target's whole one.

    `speculators`' own builder (`build_vocab_mappings_from_distribution`) over the answer tokens'
    frequencies, as its data pipeline counts them (the loss-masked tokens): the draft predicts
    only the `draft_vocab` tokens the target says most often, and vLLM maps them back with d2t."""
    if draft_vocab is None or draft_vocab >= target_vocab:
        return None, None
    from collections import Counter

    from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution

    counts = Counter(token for _, answer in pairs for token in answer)
    return build_vocab_mappings_from_distribution(dict(counts), draft_vocab, target_vocab)


def build_head(target_dir: Path, aux_layers: list[int], num_layers: int, ttt_steps: int, *, d2t=None, t2d=None):
    """The untrained head, exactly as `speculators train --speculator-type eagle3 --dry-run` builds it
    (its CLI defaults for eagle3), with sdpa attention and full attention in every layer (module docstring)."""
    from speculators.models.eagle3 import Eagle3DraftModel
    from speculators.train.cli import create_transformer_layer_config
    from transformers import AutoConfig

    vocab = AutoConfig.from_pretrained(str(target_dir)).vocab_size if d2t is None else int(d2t.shape[0])
    layer_config = create_transformer_layer_config(
        verifier_name_or_path=str(target_dir), num_layers=num_layers, draft_arch="llama", hidden_act="silu",
        sliding_window=2048, full_attention_indices=list(range(num_layers)))
    return Eagle3DraftModel.from_training_args(
        verifier_config=layer_config, t2d=t2d, d2t=d2t, verifier_name_or_path=str(target_dir),
        target_layer_ids=aux_layers, num_layers=num_layers, draft_vocab_size=vocab, norm_before_residual=True,
        norm_before_fc=True, norm_output=True, fc_norm=False, embed_requires_grad=False, ttt_steps=ttt_steps,
        draft_attn_impl="sdpa")


def step_accuracy(metrics: dict, ttt_steps: int) -> list[float]:
    """Per position j: the share of masked positions whose drafts 0..j all equal the target's greedy token."""
    return [round(float(metrics[f"full_acc_{j}_sum"]) / max(1.0, float(metrics[f"full_acc_{j}_total"])), 4)
            for j in range(ttt_steps)]


def run_head(head, batch: dict, ttt_steps: int, loss_config):
    return head(hidden_states=batch["hidden_states"], input_ids=batch["input_ids"],
                document_ids=batch["document_ids"], loss_mask=batch["loss_mask"], position_ids=batch["position_ids"],
                verifier_last_hidden_states=batch["verifier_last_hidden_states"], ttt_steps=ttt_steps,
                ttt_step_loss_decay=1.0, loss_config=loss_config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="corpus JSONL (records with split train are used)")
    parser.add_argument("--target", type=Path, required=True, help="target checkpoint folder (model + tokenizer)")
    parser.add_argument("--out", type=Path, required=True, help="folder to write the speculators checkpoint to")
    parser.add_argument("--heldout", type=Path, default=None,
                        help="corpus JSONL whose heldout records estimate acceptance offline (offline-acceptance.json)")
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps (default 120)")
    parser.add_argument("--lr", type=float, default=3e-3,
                        help="peak learning rate (warm-up, linear decay) (default 3e-3)")
    parser.add_argument("--ttt-steps", type=int, default=3, help="positions the head is unrolled over (default 3)")
    parser.add_argument("--num-layers", type=int, default=1, help="draft decoder layers (default 1)")
    parser.add_argument("--aux-layers", default=None, help="three target layer ids, e.g. 1,2,3 (default: speculators')")
    parser.add_argument("--draft-vocab-size", type=int, default=None,
                        help="predict only this many of the target's tokens, the most frequent in its answers "
                        "(speculators' d2t/t2d; default: the whole vocabulary)")
    parser.add_argument("--token-budget", type=int, default=2048, help="tokens per packed row (default 2048)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="target answer length (default 64)")
    parser.add_argument("--gen-batch", type=int, default=48, help="prompts per target batch (default 48)")
    parser.add_argument("--max-train-prompts", type=int, default=None, help="use at most this many train prompts")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    try:
        summary = train(args, sys.argv if argv is None else [__file__, *argv])
    except ExampleError as exc:
        print(f"train_eagle3: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"event": "summary", **summary}), flush=True)
    return 0


def train(args: argparse.Namespace, argv: list[str]) -> dict:
    started = time.monotonic()
    for name in ("steps", "ttt_steps", "num_layers", "token_budget", "max_new_tokens", "gen_batch"):
        if getattr(args, name) < 1:
            raise TrainEagle3Error(f"--{name.replace('_', '-')} must be >= 1")
    if not (args.target / "config.json").is_file():
        raise TrainEagle3Error(f"no checkpoint at {args.target} (config.json missing); pass --target the target folder")
    try:
        from speculators.losses import resolve_loss_config
    except ImportError:
        raise TrainEagle3Error(f"{sys.executable} has no `speculators`: make setup installs it into .venv "
                               "(--no-deps), or run this with .venv-speculators/bin/python "
                               "(make speculators-env)") from None
    from importlib.metadata import version

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    prompts, skipped = read_train_split(args.corpus)
    if args.max_train_prompts is not None:
        prompts = prompts[: max(1, args.max_train_prompts)]
    tokenizer = AutoTokenizer.from_pretrained(str(args.target))
    target = AutoModelForCausalLM.from_pretrained(str(args.target), dtype=torch.float32).eval()
    aux_layers = parse_layers(args.aux_layers, target.config.num_hidden_layers)
    target_vocab = target.config.vocab_size
    if args.draft_vocab_size is not None and not 1 <= args.draft_vocab_size <= target_vocab:
        raise TrainEagle3Error(f"--draft-vocab-size must be between 1 and the target's {target_vocab}")
    log(f"{len(prompts)} train prompts; target answers them greedily (on-policy labels)")
    pairs, too_long = target_answers(target, tokenizer, prompts, max_new_tokens=args.max_new_tokens,
                                     batch_size=args.gen_batch,
                                     max_positions=target.config.max_position_embeddings, log=log)
    if not pairs:
        raise TrainEagle3Error("the target produced no answer for any train prompt; check the target checkpoint")
    samples = hidden_features(target, pairs, aux_layers, args.gen_batch)
    features_s = time.monotonic() - started
    del target
    d2t, t2d = vocab_mapping(pairs, args.draft_vocab_size, target_vocab)
    head = build_head(args.target, aux_layers, args.num_layers, args.ttt_steps, d2t=d2t, t2d=t2d)
    loss_config = resolve_loss_config("kl_div", "eager")  # the eager (unfused) loss runs on CPU
    trainable = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.0)
    warmup = max(1, args.steps // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.05, (args.steps - s) / (args.steps - warmup)))
    rng = random.Random(args.seed)
    log(f"head: {args.num_layers} layer(s), aux layers {aux_layers}, {sum(p.numel() for p in trainable):,} trained "
        f"parameters; {args.steps} steps over {len(samples)} answers")
    head.train()
    batches: list[dict] = []
    loss_value, acc = math.nan, []
    for step in range(1, args.steps + 1):
        if not batches:
            batches = pack(samples, args.token_budget, rng)
        _, loss, metrics = run_head(head, batches.pop(), args.ttt_steps, loss_config)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        scheduler.step()
        loss_value, acc = float(loss.detach()), step_accuracy(metrics, args.ttt_steps)
        print(json.dumps({"step": step, "total": args.steps, "loss": round(loss_value, 5), "acc": acc}), flush=True)
        if not math.isfinite(loss_value):
            raise TrainEagle3Error(f"loss is {loss_value} at step {step}; lower --lr")
    head.eval()
    args.out.mkdir(parents=True, exist_ok=True)
    head.to(torch.bfloat16).save_pretrained(str(args.out))  # speculators' writer; bf16 as `speculators train` saves
    saved = json.loads((args.out / "config.json").read_text())
    summary = {
        "argv": [sys.executable, *argv], "speculators_version": version("speculators"),
        "torch_version": torch.__version__,
        "transformers_version": version("transformers"), "speculators_config": saved.get("speculators_config"),
        "aux_layers": aux_layers, "draft_vocab_size": saved.get("draft_vocab_size"), "num_layers": args.num_layers,
        "ttt_steps": args.ttt_steps, "train_prompts": len(prompts), "skipped": skipped, "prompts_too_long": too_long,
        "answers": len(pairs), "answer_tokens": sum(len(a) for _, a in pairs), "steps": args.steps,
        "trained_parameters": sum(p.numel() for p in trainable), "saved_dtype": "bfloat16",
        "final_loss": round(loss_value, 4), "final_step_accuracy": acc, "features_s": round(features_s, 1),
    }
    if args.heldout is not None:  # on the saved (bf16) weights, computed in float32 as the trainer ran
        estimated = offline_estimate(head.float(), args.target, args.heldout, aux_layers=aux_layers,
                                     ttt_steps=args.ttt_steps, max_new_tokens=args.max_new_tokens,
                                     gen_batch=args.gen_batch, token_budget=args.token_budget, log=log)
        summary["offline_acceptance"] = write(args.out, estimated)
    summary["total_s"] = round(time.monotonic() - started, 1)
    (args.out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    return summary


# --- offline acceptance (offline_acceptance.py's definition, method eagle3) -----------------------


def offline_estimate(head, target_dir: Path, heldout: Path, *, aux_layers: list[int], ttt_steps: int,
                     max_new_tokens: int, gen_batch: int, token_budget: int, log) -> dict:
    """The per-position estimate for `head` (a float32 Eagle3DraftModel) on `heldout`'s prompts: the target answers
    them greedily, its hidden states feed the head exactly as in training (hidden_features), and the head is
    unrolled over `ttt_steps` positions with `speculators`' own forward (run_head)."""
    import torch
    from speculators.losses import resolve_loss_config
    from transformers import AutoModelForCausalLM, AutoTokenizer

    prompts = read_heldout(heldout)
    tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
    target = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32).eval()
    pairs, too_long = target_answers(target, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=gen_batch,
                                     max_positions=target.config.max_position_embeddings, log=log)
    samples = hidden_features(target, pairs, aux_layers, gen_batch)
    del target
    accepted = [0] * ttt_steps
    drafts = 0
    loss_config = resolve_loss_config("kl_div", "eager")
    head.eval()
    with torch.inference_mode():
        for batch in pack(samples, token_budget, None):
            draft_tokens, _, _ = run_head(head, batch, ttt_steps, loss_config)
            drafts += int(batch["loss_mask"].sum())
            for j, count in enumerate(accepted_counts(draft_tokens, batch, head.d2t)):
                accepted[j] += count
    return report("eagle3", "(mapped to the target's vocabulary by d2t when the head's is reduced)", accepted, drafts,
                  heldout_prompts=len(prompts), prompts_too_long=too_long, answers=len(pairs),
                  max_new_tokens=max_new_tokens)


if __name__ == "__main__":
    sys.exit(main())
