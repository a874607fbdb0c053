"""Offline acceptance of a trained draft, before it is served: teacher-forced, per position, on held-out prompts.

The served engine drafts k tokens after each verified token and accepts the longest
prefix that equals the target's greedy choice. This estimate does the same on the
held-out split without an engine: the target answers each held-out prompt greedily
(transformers), its hidden states feed the head exactly as in training
(train_eagle3.hidden_features), and the head is unrolled over k positions with
`speculators`' own forward. At every answer position, draft j counts as accepted
when drafts 0..j all equal the target's greedy tokens (accepted_counts;
the inputs are teacher-forced, which changes nothing for an accepted prefix: there
the head's own tokens are the target's; a head with a reduced vocabulary has its drafts
mapped to the target's ids by its d2t first, as vLLM does). So

    p_j = accepted at position j / drafts      (vLLM's per-position acceptance,
                                                 spec_decode_num_accepted_tokens_per_pos / num_drafts)
    acceptance length = 1 + sum_j p_j

It differs from the served figure in known ways: the estimate drafts at every answer
position (the engine drafts only after each verification step), it uses the target's
float32 transformers forward (the engine's numerics differ slightly), and the head's
weights are the bf16 ones it is saved with. The report sets both side by side; the gate
never reads this file (training metrics cannot authorise promotion).

A draft model (train_draft.py, method draft_model) is estimated the same way, without
`speculators` (draft_model_counts): one teacher-forced pass of the draft over prompt +
answer gives its argmax at every position, and its j-th draft from answer position t is
its argmax at t + j (exact for an accepted prefix: there its own earlier drafts are the
target's tokens, which the pass feeds it). Both methods count with accepted_counts and
write the same fields (report), so the two estimates are one definition.

Written as `offline-acceptance.json` (ARTIFACT) in the training output.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

ARTIFACT = "offline-acceptance.json"
FORMAT = 1


class OfflineAcceptanceError(Exception):
    """The estimate cannot be made from these inputs; the message says what to change."""


def read_heldout(corpus: Path) -> list[list[dict[str, str]]]:
    """The prompt messages of every `heldout` record (other lines are skipped)."""
    prompts = []
    try:
        lines = corpus.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise OfflineAcceptanceError(f"cannot read {corpus}: {exc.strerror}; pass --heldout the held-out corpus") from exc
    for raw in lines:
        try:
            record = json.loads(raw)
        except json.JSONDecodeError:
            continue
        messages = record.get("messages") if isinstance(record, dict) else None
        if record.get("split") == "heldout" and isinstance(messages, list) and messages:
            prompts.append([{"role": m["role"], "content": m["content"]} for m in messages])
    if not prompts:
        raise OfflineAcceptanceError(f"{corpus} has no record with split 'heldout'; pass the corpus's held-out file")
    return prompts


def estimate(head, target_dir: Path, heldout: Path, aux_layers: list[int], ttt_steps: int, *,
             max_new_tokens: int, gen_batch: int, token_budget: int, log) -> dict:
    """The per-position estimate for `head` (a float32 Eagle3DraftModel) on `heldout`'s prompts."""
    import torch
    from speculators.losses import resolve_loss_config
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from train_draft import target_answers
    from train_eagle3 import hidden_features, pack, run_head

    prompts = read_heldout(heldout)
    tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
    target = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32).eval()
    pairs, too_long = target_answers(target, tokenizer, prompts, max_new_tokens, gen_batch,
                                     target.config.max_position_embeddings, log)
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


def report(method: str, drafted_how: str, accepted: list[int], drafts: int, *, heldout_prompts: int,
           prompts_too_long: int, answers: int, max_new_tokens: int) -> dict:
    """The artifact's fields (contracts/artifacts/offline_acceptance.py, format 1) from the counts; k = len(accepted)."""
    k = len(accepted)
    per_position = [round(a / drafts, 4) if drafts else math.nan for a in accepted]
    return {
        "format": FORMAT, "method": method,
        "definition": "teacher-forced on the held-out split against the target's greedy tokens: p_j = share of "
                      f"answer positions t whose drafts 1..j {drafted_how} all equal the target's next greedy "
                      "tokens; acceptance_length = 1 + sum(p_j)",
        "heldout_prompts": heldout_prompts, "prompts_too_long": prompts_too_long, "answers": answers,
        "drafts": drafts, "accepted_per_position": accepted,
        "per_position_acceptance": per_position, "num_speculative_tokens": k,
        "acceptance_length": round(1 + sum(per_position), 4),
        "acceptance_rate": round(sum(accepted) / (drafts * k), 4) if drafts else math.nan,
        "max_new_tokens": max_new_tokens,
    }


DRAFT_MODEL_HOW = "(the draft's argmax at t..t+j-1 in one pass over prompt + the target's answer)"


def draft_model_counts(draft, pairs: list[tuple[list[int], list[int]]], k: int, batch_size: int) -> tuple[list[int], int]:
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
            for row, (prompt, answer) in enumerate(chunk):  # right padding: causal attention leaves real positions as they are
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


def accepted_counts(draft_tokens, batch: dict, d2t) -> list[int]:
    """Per position j, how many answer positions i have drafts 0..j all equal to the target's greedy tokens.

    `draft_tokens[j][0, i]` is the head's j-th draft from position i (in its own vocabulary; `d2t`
    maps draft id d to target id d + d2t[d]); it proposes the token after position i + j, which in
    the target's own greedy answer is `input_ids[i + j + 1]`. A position counts only where position
    i + j is an answer position of the same sample (the loss mask and document ids)."""
    import torch

    ids, mask, docs = batch["input_ids"][0], batch["loss_mask"][0].bool(), batch["document_ids"][0]
    n = ids.shape[0]
    greedy_next = torch.cat([ids[1:], ids.new_full((1,), -1)])
    alive = mask.clone()
    counts = []
    for j, tokens in enumerate(draft_tokens):
        drafted = tokens[0] if d2t is None else tokens[0] + d2t[tokens[0]]
        ok = torch.zeros(n, dtype=torch.bool)
        if j < n:
            ok[: n - j] = (drafted[: n - j] == greedy_next[j:]) & mask[j:] & (docs[j:] == docs[: n - j])
        alive &= ok
        counts.append(int(alive.sum()))
    return counts


def write(out: Path, report: dict) -> dict:
    """Write the artifact; its name and headline figures for the trainer's summary."""
    (out / ARTIFACT).write_text(json.dumps(report, indent=2) + "\n")
    return {"artifact": ARTIFACT, "per_position_acceptance": report["per_position_acceptance"],
            "acceptance_length": report["acceptance_length"]}


def load_head(head_dir: Path, target_dir: Path):
    """A saved head, in float32, its verifier weights (norm, lm_head) read from `target_dir`."""
    from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig

    config = Eagle3SpeculatorConfig.from_pretrained(str(head_dir))
    config.speculators_config.verifier.name_or_path = str(target_dir)  # the path it was trained with may be relative
    config.transformer_layer_config._attn_implementation = "sdpa"  # not saved; flex attention needs a GPU
    return Eagle3DraftModel.from_pretrained(str(head_dir), config=config).float(), config


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="Estimate a saved EAGLE-3 head's acceptance offline (module docstring).")
    parser.add_argument("--head", type=Path, required=True, help="the head's folder (speculators format)")
    parser.add_argument("--target", type=Path, required=True, help="the target checkpoint folder")
    parser.add_argument("--heldout", type=Path, required=True, help="corpus JSONL with heldout records")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="target answer length (default 64)")
    parser.add_argument("--gen-batch", type=int, default=48, help="prompts per target batch (default 48)")
    parser.add_argument("--token-budget", type=int, default=2048, help="tokens per packed row (default 2048)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if not (args.head / "config.json").is_file():
        print(f"offline_acceptance: no head at {args.head} (config.json missing)", file=sys.stderr)
        return 2
    head, config = load_head(args.head, args.target)
    k = config.speculators_config.proposal_methods[0].speculative_tokens
    try:
        report = estimate(head, args.target, args.heldout, config.eagle_aux_hidden_state_layer_ids, k,
                          max_new_tokens=args.max_new_tokens, gen_batch=args.gen_batch,
                          token_budget=args.token_budget, log=lambda m: print(f"offline_acceptance: {m}", file=sys.stderr))
    except OfflineAcceptanceError as exc:
        print(f"offline_acceptance: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(write(args.head, report)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
