"""What both example trainers read, and the examples' one error root.

train_draft.py and train_eagle3.py read the same corpus (one JSON object a line: id, messages,
reference_completion, input_tokens, output_tokens, content_class, split) and label it the same
way: the target answers each prompt greedily, so what a draft learns (and is estimated on) is
what the target says, not what the traffic said. Both read it here, and so does
eagle3_acceptance.py; nothing here imports another example.

The module tree (each imports only what is below it; tests/unit/examples/test_import_tree.py checks it):

    trainer_data.py        this file: the corpus readers, the target's answers, ExampleError
    offline_acceptance.py  the offline estimate's one definition and its artifact
    train_draft.py         -> trainer_data, offline_acceptance, toy_target (the shared training loop)
    train_eagle3.py        -> trainer_data, offline_acceptance
    eagle3_acceptance.py   -> train_eagle3 (a saved head's estimate, on its own)

Run as scripts, each finds its neighbours the way Python runs any script: the script's own
folder is the first entry of its module path, so plain sibling imports need no path edits.

Only the standard library is imported at module level: the trainers run in two environments
(`.venv` and `.venv-speculators`), and torch is imported where a function needs it.
"""

from __future__ import annotations

import json
from pathlib import Path


class ExampleError(Exception):
    """An example cannot run on these inputs; the message says what to change (the script exits 2 with it)."""


def read_train_split(corpus: Path) -> tuple[list[list[dict[str, str]]], dict[str, int]]:
    """The prompt messages of every `train` record, and counts of what was skipped and why."""
    prompts: list[list[dict[str, str]]] = []
    skipped = {"not_json": 0, "not_a_record": 0, "not_train": 0}
    try:
        handle = corpus.open(encoding="utf-8")
    except OSError as exc:
        raise ExampleError(f"cannot read corpus {corpus}: {exc.strerror}; pass --corpus a corpus JSONL file") from exc
    with handle:
        for raw in handle:
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except json.JSONDecodeError:
                skipped["not_json"] += 1
                continue
            messages = record.get("messages") if isinstance(record, dict) else None
            if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in messages
            ):
                skipped["not_a_record"] += 1
                continue
            if record.get("split") != "train":
                skipped["not_train"] += 1
                continue
            prompts.append([{"role": m["role"], "content": m["content"]} for m in messages])
    if not prompts:
        raise ExampleError(f"{corpus} has no record with split 'train' (skipped: {skipped}); pass the corpus's "
                           "train file")
    return prompts, skipped


def read_heldout(corpus: Path) -> list[list[dict[str, str]]]:
    """The prompt messages of every `heldout` record (other lines are skipped): the offline estimate's prompts."""
    prompts = []
    try:
        lines = corpus.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ExampleError(f"cannot read {corpus}: {exc.strerror}; pass --heldout the held-out corpus") from exc
    for raw in lines:
        try:
            record = json.loads(raw)
        except json.JSONDecodeError:
            continue
        messages = record.get("messages") if isinstance(record, dict) else None
        if record.get("split") == "heldout" and isinstance(messages, list) and messages:
            prompts.append([{"role": m["role"], "content": m["content"]} for m in messages])
    if not prompts:
        raise ExampleError(f"{corpus} has no record with split 'heldout'; pass the corpus's held-out file")
    return prompts


def target_answers(model, tokenizer, prompts, *, max_new_tokens: int, batch_size: int, max_positions: int,
                   log):
    """(prompt ids, answer ids) per prompt that fits, answered greedily by the target.

    Prompts are batched by length with left padding; an answer ends at the end-of-sequence
    token (kept: the draft must learn to stop where the target stops)."""
    import torch

    encoded = []
    for messages in prompts:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tokenizer.encode(text, add_special_tokens=False)  # the template writes the special tokens
        if len(ids) + max_new_tokens <= max_positions:
            encoded.append(ids)
    encoded.sort(key=len)
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos  # left padding is masked out
    pairs = []
    with torch.inference_mode():
        for first in range(0, len(encoded), batch_size):
            chunk = encoded[first : first + batch_size]
            width = max(len(ids) for ids in chunk)
            input_ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, ids in enumerate(chunk):
                input_ids[row, width - len(ids) :] = torch.tensor(ids)
                mask[row, width - len(ids) :] = 1
            out = model.generate(input_ids=input_ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                                 do_sample=False, eos_token_id=eos, pad_token_id=pad)
            for row, ids in enumerate(chunk):
                answer = out[row, width:].tolist()
                if eos in answer:
                    answer = answer[: answer.index(eos) + 1]
                if answer:
                    pairs.append((ids, answer))
            log(f"target answered {min(first + batch_size, len(encoded))}/{len(encoded)} prompts")
    return pairs, len(prompts) - len(encoded)

