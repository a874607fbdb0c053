"""Example operator trainer: distil a small draft model from the target for draft_model speculation.

    python infra/examples/train_draft.py --corpus corpus-train.jsonl --target models/toy-target --out draft/

specdec runs the operator's own trainer through its trainer-proxy (an argv, no
shell); this script is the one the embedded default campaign names. It shows
what specdec expects of any trainer: read the corpus, write a checkpoint to
--out, print its loss as JSON lines on stdout (`{"step": n, "total": N, "loss": x}`:
the campaign's commands.train.progress, format json, relays them as progress), exit
non-zero on failure.

What it does:
1. reads the corpus (one JSON object a line: id, messages, reference_completion,
   input_tokens, output_tokens, content_class, split) and keeps `split == "train"`;
   lines that are not such records are counted and skipped;
2. renders each prompt with the target's chat template and lets the target
   answer it greedily (batched, --max-new-tokens): the draft must predict what
   the target says, not what the traffic said, so the target's answers are the labels;
3. builds the draft: the target's architecture with fewer layers (--layers),
   started from the target's embeddings, final norm and evenly spaced layers
   (first and last included), the usual student initialisation in distillation;
   with --freeze-embeddings the embeddings (and the head tied to them) stay the
   target's and only the layers and norms train: on a real target the 49,152 x 576
   embedding is most of a 2-layer draft, and keeping it halves a step's cost;
4. trains it on the answer tokens and saves it, in the target's saved dtype, with the target's tokenizer files,
   so vLLM serves it as `{"method": "draft_model", "model": OUT}` (same
   vocabulary and maximum length as the target);
5. with `--heldout`: estimates the saved draft's acceptance offline on the held-out
   prompts (the target answers them greedily, as it answers the train split; one
   teacher-forced pass of the draft per answer, draft_model_counts; counted and written
   by offline_acceptance.py, the same definition and file as the EAGLE-3 trainer's:
   `offline-acceptance.json`).

The corpus readers and the target's answers are trainer_data.py's, shared with
train_eagle3.py; run as a script, Python finds these neighbours in the script's own folder.

A summary JSON line (`{"event": "summary", ...}`) closes stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path

from offline_acceptance import accepted_counts, report, write  # one definition for every trainer
from toy_target import ToyBuildError, train_lm  # the same training loop as the toy target
from trainer_data import ExampleError, read_heldout, read_train_split, target_answers

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


class TrainDraftError(ExampleError):
    """The draft cannot be trained from these inputs; the message says what to change."""


def make_draft(target, layers: int):
    """A `layers`-layer copy of the target's architecture started from its weights (see module docstring)."""
    import copy

    from transformers import LlamaForCausalLM

    n = target.config.num_hidden_layers
    if not 1 <= layers < n:
        raise TrainDraftError(f"--layers must be between 1 and {n - 1} (the target has {n})")
    picked = [0] if layers == 1 else [round(i * (n - 1) / (layers - 1)) for i in range(layers)]
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = layers
    if getattr(config, "layer_types", None):
        config.layer_types = [config.layer_types[i] for i in picked]
    draft = LlamaForCausalLM(config)
    state = target.state_dict()
    mapped = {}
    for key, value in state.items():
        if key.startswith("model.layers."):
            index, rest = key[len("model.layers."):].split(".", 1)
            if int(index) in picked:
                mapped[f"model.layers.{picked.index(int(index))}.{rest}"] = value.clone()
        else:
            mapped[key] = value.clone()
    missing, unexpected = draft.load_state_dict(mapped, strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:  # lm_head is tied to the embeddings
        raise TrainDraftError(f"target weights do not fit the draft (missing {missing}, unexpected {unexpected})")
    draft.tie_weights()
    return draft, picked


def read_heldout_prompts(args: argparse.Namespace) -> list[list[dict[str, str]]] | None:
    """The held-out prompts the offline estimate answers (None without --heldout); refuses its options without it."""
    if args.heldout is None:
        given = [name for name, value in (("--num-speculative-tokens", args.num_speculative_tokens),
                                          ("--max-heldout-prompts", args.max_heldout_prompts)) if value is not None]
        if given:
            raise TrainDraftError(f"{' and '.join(given)} set the offline estimate, which needs --heldout; pass it too")
        return None
    if args.num_speculative_tokens is None:
        args.num_speculative_tokens = 3
    for name, value in (("--num-speculative-tokens", args.num_speculative_tokens),
                        ("--max-heldout-prompts", args.max_heldout_prompts)):
        if value is not None and value < 1:
            raise TrainDraftError(f"{name} must be >= 1, not {value}")
    prompts = read_heldout(args.heldout)
    return prompts if args.max_heldout_prompts is None else prompts[: args.max_heldout_prompts]


# --- offline acceptance (offline_acceptance.py's definition, method draft_model) ------------------


DRAFT_MODEL_HOW = "(the draft's argmax at t..t+j-1 in one pass over prompt + the target's answer)"


def draft_model_counts(draft, pairs: list[tuple[list[int], list[int]]], k: int,
                       batch_size: int) -> tuple[list[int], int]:
    """(accepted per position 1..k, drafts) of a causal LM draft against the target's greedy (prompt, answer) pairs.

    Drafted from the positions the EAGLE-3 estimate drafts from: each answer token that has a next
    answer token (the target emits the first answer token itself, the draft then proposes from there)."""
    import torch

    accepted, drafts = [0] * k, 0
    order = sorted(pairs, key=lambda pair: len(pair[0]) + len(pair[1]))
    with torch.inference_mode():
        for first in range(0, len(order), batch_size):
            chunk = order[first : first + batch_size]
            width = max(len(p) + len(a) for p, a in chunk)
            ids = torch.zeros((len(chunk), width), dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            # Right padding: causal attention leaves real positions as they are.
            for row, (prompt, answer) in enumerate(chunk):
                ids[row, : len(prompt) + len(answer)] = torch.tensor(prompt + answer)
                mask[row, : len(prompt) + len(answer)] = 1
            hidden = draft.model(input_ids=ids, attention_mask=mask).last_hidden_state
            for row, (prompt, answer) in enumerate(chunk):
                n = len(prompt) + len(answer)
                # The head row by row: a batch's logits at once would be batch x width x vocab floats.
                argmax = draft.lm_head(hidden[row, :n]).argmax(-1)
                loss_mask = torch.zeros(n, dtype=torch.bool)
                loss_mask[len(prompt) : n - 1] = True
                sample = {"input_ids": ids[row, :n].unsqueeze(0), "loss_mask": loss_mask.unsqueeze(0),
                          "document_ids": torch.zeros((1, n), dtype=torch.long)}
                # The j-th draft from position i is the argmax at i + j (-1 past the end: never a token).
                shifted = [torch.cat([argmax[j:], argmax.new_full((min(j, n),), -1)]).unsqueeze(0) for j in range(k)]
                drafts += int(loss_mask.sum())
                for j, count in enumerate(accepted_counts(shifted, sample, None)):
                    accepted[j] += count
    return accepted, drafts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="corpus JSONL (records with split train are used)")
    parser.add_argument("--target", type=Path, required=True, help="target checkpoint folder (model + tokenizer)")
    parser.add_argument("--out", type=Path, required=True, help="folder to write the draft checkpoint to")
    parser.add_argument("--steps", type=int, default=150, help="training steps (default 150)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--layers", type=int, default=2, help="draft layers (default 2)")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (default 2e-3)")
    parser.add_argument("--token-budget", type=int, default=2048, help="padded tokens per batch (default 2048)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="target answer length for labels (default 64)")
    parser.add_argument("--gen-batch", type=int, default=48, help="prompts per target generation batch (default 48)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: fastest on a shared 2-core machine)")
    parser.add_argument("--freeze-embeddings", action="store_true",
                        help="keep the target's embeddings (and tied head) frozen")
    parser.add_argument("--max-train-prompts", type=int, default=None,
                        help="use at most this many train prompts, the first in corpus order (default: all)")
    parser.add_argument("--heldout", type=Path, default=None,
                        help="corpus JSONL whose heldout records estimate acceptance offline (offline-acceptance.json)")
    parser.add_argument("--num-speculative-tokens", type=int, default=None,
                        help="with --heldout: k, the draft positions estimated (default 3, the example campaigns' k)")
    parser.add_argument("--max-heldout-prompts", type=int, default=None,
                        help="with --heldout: estimate on at most this many held-out prompts, the first (default: all)")
    args = parser.parse_args(argv)
    try:
        summary = train(args)
    except ExampleError as exc:
        print(f"train_draft: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"event": "summary", **summary}), flush=True)
    return 0


def train(args: argparse.Namespace) -> dict:
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaForCausalLM

    def log(message: str) -> None:
        print(f"train_draft: {message}", file=sys.stderr, flush=True)

    def log_loss(line: str) -> None:
        print(line, flush=True)

    started = time.monotonic()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    if not (args.target / "config.json").is_file():
        raise TrainDraftError(f"no checkpoint at {args.target} (config.json missing); pass --target the target folder")
    prompts, skipped = read_train_split(args.corpus)
    heldout = read_heldout_prompts(args)  # before any training: a wrong path fails in seconds
    if args.max_train_prompts is not None:
        if args.max_train_prompts < 1:
            raise TrainDraftError(f"--max-train-prompts must be >= 1, not {args.max_train_prompts}")
        skipped["over_max_train_prompts"] = max(0, len(prompts) - args.max_train_prompts)
        prompts = prompts[: args.max_train_prompts]
    tokenizer = AutoTokenizer.from_pretrained(str(args.target))
    target = LlamaForCausalLM.from_pretrained(str(args.target), dtype=torch.float32).eval()
    max_positions = target.config.max_position_embeddings
    log(f"{len(prompts)} train prompts ({skipped} skipped); generating target answers")
    pairs, too_long = target_answers(target, tokenizer, prompts, max_new_tokens=args.max_new_tokens,
                                     batch_size=args.gen_batch, max_positions=max_positions, log=log)
    generated_s = time.monotonic() - started
    if not pairs:
        raise TrainDraftError("the target produced no answer for any train prompt; check the target checkpoint")
    if heldout is not None:  # the target is freed before training; its held-out answers are the labels
        heldout_started = time.monotonic()
        log(f"{len(heldout)} held-out prompts; generating target answers for the offline estimate")
        heldout_pairs, heldout_too_long = target_answers(target, tokenizer, heldout, max_new_tokens=args.max_new_tokens,
                                                         batch_size=args.gen_batch, max_positions=max_positions,
                                                         log=log)
        offline_s = time.monotonic() - heldout_started
        if not heldout_pairs:
            raise TrainDraftError(f"the target answered none of the {len(heldout)} held-out prompts "
                                  f"({heldout_too_long} too long for it); pass --heldout a corpus with shorter prompts")
    draft, picked = make_draft(target, args.layers)
    # The dtype the target is saved in (its config.json), not the float32 it was loaded in here.
    saved = json.loads((args.target / "config.json").read_text())
    saved_dtype = getattr(torch, str(saved.get("dtype") or saved.get("torch_dtype") or "float32"))
    del target
    if args.freeze_embeddings:
        draft.get_input_embeddings().weight.requires_grad_(False)  # the tied head shares this tensor
    log(f"draft: layers {picked} of the target; training {args.steps} steps on {len(pairs)} answers")
    examples = [(ids + answer, len(ids)) for ids, answer in pairs]
    try:
        loss = train_lm(draft, examples, steps=args.steps, token_budget=args.token_budget, lr=args.lr,
                        seed=args.seed, pad_id=tokenizer.pad_token_id, log=log_loss)
    except ToyBuildError as exc:  # the toy builder's own root: its source is its build's cache key, so it stays put
        raise TrainDraftError(str(exc)) from None
    if not math.isfinite(loss):
        raise TrainDraftError(f"final loss is {loss}; lower --lr")
    args.out.mkdir(parents=True, exist_ok=True)
    draft = draft.to(saved_dtype)
    draft.save_pretrained(str(args.out), safe_serialization=True)
    GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                     pad_token_id=tokenizer.pad_token_id).save_pretrained(str(args.out))
    for name in TOKENIZER_FILES:  # the same tokenizer: draft_model speculation needs the target's vocabulary
        if (args.target / name).is_file():
            shutil.copyfile(args.target / name, args.out / name)
    offline = None
    if heldout is not None:  # the saved (served-dtype) weights in float32, as the trainer ran; .float() is in place
        estimate_started = time.monotonic()
        accepted, drafts = draft_model_counts(draft.float().eval(), heldout_pairs, args.num_speculative_tokens,
                                              args.gen_batch)
        offline = write(args.out, report("draft_model", DRAFT_MODEL_HOW, accepted, drafts, heldout_prompts=len(heldout),
                                         prompts_too_long=heldout_too_long, answers=len(heldout_pairs),
                                         max_new_tokens=args.max_new_tokens))
        offline["offline_s"] = round(offline_s + time.monotonic() - estimate_started, 1)
        log(f"offline acceptance {offline['per_position_acceptance']} (length {offline['acceptance_length']}) "
            f"in {offline['offline_s']} s")
    summary = {"train_prompts": len(prompts), "skipped": skipped, "prompts_too_long": too_long,
               "answers": len(pairs), "answer_tokens": sum(len(a) for _, a in pairs),
               "draft_layers_from_target": picked,
               "steps": args.steps, "frozen_embeddings": args.freeze_embeddings,
               "trained_parameters": sum(p.numel() for p in draft.parameters() if p.requires_grad),
               "saved_dtype": str(saved_dtype).removeprefix("torch."), "final_loss": round(loss, 4),
               "generate_s": round(generated_s, 1),
               "total_s": round(time.monotonic() - started, 1)}
    if offline is not None:
        summary["offline_acceptance"] = offline
    (args.out / "train-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    sys.exit(main())
