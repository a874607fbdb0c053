"""Offline acceptance of a trained draft, before it is served: the one definition both example trainers count with.

The served engine drafts k tokens after each verified token and accepts the longest
prefix that equals the target's greedy choice. The estimate does the same on the
held-out split without an engine: the target answers each held-out prompt greedily
(trainer_data.target_answers), the trained draft proposes k tokens at every answer
position, teacher-forced, and draft j counts as accepted when drafts 0..j all equal the
target's greedy tokens (accepted_counts; the inputs are teacher-forced, which changes
nothing for an accepted prefix: there the draft's own tokens are the target's; a head with
a reduced vocabulary has its drafts mapped to the target's ids by its d2t first, as vLLM
does). So

    p_j = accepted at position j / drafts      (vLLM's per-position acceptance,
                                                 spec_decode_num_accepted_tokens_per_pos / num_drafts)
    acceptance length = 1 + sum_j p_j

How each kind of draft proposes lives with its trainer, which knows how to run it:
- an EAGLE-3 head (train_eagle3.offline_estimate): its hidden states come from the target
  exactly as in training (train_eagle3.hidden_features) and the head is unrolled over k
  positions with `speculators`' own forward; eagle3_acceptance.py estimates a head saved earlier;
- a draft model (train_draft.draft_model_counts, method draft_model): one teacher-forced
  pass of the draft over prompt + answer gives its argmax at every position, and its j-th
  draft from answer position t is its argmax at t + j (exact for an accepted prefix: there
  its own earlier drafts are the target's tokens, which the pass feeds it).
Both count with accepted_counts and write the same fields (report), so the two estimates
are one definition. This module imports no other example (tests/unit/examples/test_import_tree.py).

It differs from the served figure in known ways: the estimate drafts at every answer
position (the engine drafts only after each verification step), it uses the target's
float32 transformers forward (the engine's numerics differ slightly), and the draft's
weights are the ones it is saved with. The report sets both side by side; the gate
never reads this file (training metrics cannot authorise promotion).

Written as `offline-acceptance.json` (ARTIFACT) in the training output.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

ARTIFACT = "offline-acceptance.json"
FORMAT = 1


def report(method: str, drafted_how: str, accepted: list[int], drafts: int, *, heldout_prompts: int,
           prompts_too_long: int, answers: int, max_new_tokens: int) -> dict:
    """The artifact's fields (contracts/artifacts/offline_acceptance.py, format 1) from the counts;
    k = len(accepted)."""
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
