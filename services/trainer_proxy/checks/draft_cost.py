"""The draft's forward cost per token against the target's: `training/draft-cost.json`.

Timed on the CPU after the probes pass (and on a reused draft's copy), both models in float32 on one
batch, interleaved so a slow stretch of a shared machine falls on both (docs/trainer-proxy.md#draft-cost
has the method and its limits). Evidence, never a verdict: a failure writes no file and logs why.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contracts import layout
from contracts.artifacts.training import DraftCost
from services.runtime.bundle.bundle import ArtifactMissing, BundleStore
from services.trainer_proxy.checks.probes import FALLBACK_PROMPT, prompt_text
from services.trainer_proxy.planning.inputs import prompt_messages

COST_PROMPTS = 8
# Dense forward time does not depend on which tokens are fed, only on how many. 8 x 16
# tokens (one 135M-target forward is about 35 GFLOP) keep six target forwards to seconds
# on two idle cores; on two busy ones a forward took 9 s (8 x 64: 15 s). A small batch
# is also nearer the few tokens a speculative step feeds.
PROMPT_TOKENS = 16
REPETITIONS = 5
DTYPE = "float32"
# Loading a target on the service's CPU in float32 and running a batch through it
# must stay cheap: checkpoints with more weight bytes than this are not timed.
MAX_WEIGHT_BYTES = 2 * 1024**3
TIMEOUT_S = 120.0
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


class CostNotMeasured(Exception):
    """Why the draft's cost was not measured, in words."""


def time_interleaved(
    draft: Callable[[], object], target: Callable[[], object], *, repetitions: int,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[list[float], list[float]]:
    """Seconds of each timed call: a warm-up of each first (untimed), then draft, target, draft, ..."""
    draft()
    target()
    draft_s: list[float] = []
    target_s: list[float] = []
    for _ in range(repetitions):
        for forward, times in ((draft, draft_s), (target, target_s)):
            start = clock()
            forward()
            times.append(clock() - start)
    return draft_s, target_s


def summarize(
    run_id: str, draft_s: list[float], target_s: list[float], *, prompts: int, tokens: int, threads: int,
    dtype: str, draft_parameters: int, target_parameters: int,
) -> DraftCost:
    """The record from the timings: medians per token, and their ratio from the same unrounded numbers."""
    if not draft_s or len(draft_s) != len(target_s):
        raise CostNotMeasured(f"unequal or no timings ({len(draft_s)} draft, {len(target_s)} target)")
    if tokens < 1:
        raise CostNotMeasured("the batch holds no tokens")
    draft_ms = statistics.median(draft_s) * 1000.0 / tokens
    target_ms = statistics.median(target_s) * 1000.0 / tokens
    if draft_ms <= 0 or target_ms <= 0:
        raise CostNotMeasured(f"a median forward took no measurable time (draft {draft_ms} ms, target {target_ms} ms)")
    return DraftCost(
        run_id=run_id, batch_prompts=prompts, batch_tokens=tokens, repetitions=len(draft_s), threads=threads,
        dtype=dtype, draft_ms_per_token=draft_ms, target_ms_per_token=target_ms, relative_cost=draft_ms / target_ms,
        draft_parameters=draft_parameters, target_parameters=target_parameters,
    )


def _weight_bytes(checkpoint: Path) -> int:
    if not checkpoint.is_dir():
        raise CostNotMeasured(f"{checkpoint} is not a local checkpoint folder")
    return sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)


def _batch(tokenizer: Any, prompts: list[list[dict[str, str]]], max_tokens: int) -> tuple[Any, Any, int, int]:
    """(input_ids, attention_mask, prompts, real tokens): right-padded, every prompt cut to max_tokens."""
    import torch

    texts = [prompt_text(tokenizer, messages) for messages in prompts] or [FALLBACK_PROMPT]
    rows = [tokenizer(text, truncation=True, max_length=max_tokens).input_ids for text in texts]
    rows = [row for row in rows if row]
    if not rows:
        raise CostNotMeasured("no prompt gave any token")
    width = max(len(row) for row in rows)
    # Padding positions are masked out, so any valid ID will do when the tokenizer has no pad token.
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.tensor([row + [pad] * (width - len(row)) for row in rows], dtype=torch.long)
    mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows], dtype=torch.long)
    return ids, mask, len(rows), sum(len(row) for row in rows)


def measure(
    run_id: str, draft_dir: Path, *, target: Path, tokenizer: Path, prompts: list[list[dict[str, str]]],
    repetitions: int = REPETITIONS, prompt_tokens: int = PROMPT_TOKENS,
) -> DraftCost:
    """Load both models on the CPU and time them on one batch; CostNotMeasured (or any load error) when it cannot."""
    for name, path in (("draft", draft_dir), ("target", target)):
        size = _weight_bytes(path)
        if size > MAX_WEIGHT_BYTES:
            raise CostNotMeasured(
                f"the {name}'s weights are {size} bytes, over the {MAX_WEIGHT_BYTES} bytes timed on CPU")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
    ids, mask, count, tokens = _batch(tok, prompts, prompt_tokens)
    draft = AutoModelForCausalLM.from_pretrained(draft_dir, dtype=torch.float32).eval()
    target_model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    with torch.inference_mode():
        draft_s, target_s = time_interleaved(
            lambda: draft(input_ids=ids, attention_mask=mask, use_cache=False),
            lambda: target_model(input_ids=ids, attention_mask=mask, use_cache=False),
            repetitions=repetitions,
        )
    return summarize(
        run_id, draft_s, target_s, prompts=count, tokens=tokens, threads=torch.get_num_threads(), dtype=DTYPE,
        draft_parameters=sum(p.numel() for p in draft.parameters()),
        target_parameters=sum(p.numel() for p in target_model.parameters()),
    )


async def record(
    bundle: BundleStore, run_id: str, draft_dir: Path, *, target: Path, tokenizer: Path, log: Any,
    timeout_s: float = TIMEOUT_S,
) -> DraftCost | None:
    """Measure and write `training/draft-cost.json` once (a redelivery keeps the first); None, logged, when
    not measured."""
    try:
        try:
            return DraftCost.model_validate(bundle.read_json(run_id, layout.TRAINING_DRAFT_COST))
        except ArtifactMissing:
            pass
        prompts = prompt_messages(bundle.read_bytes(run_id, layout.TRAINING_CORPUS_HELDOUT), COST_PROMPTS)
        cost = await asyncio.wait_for(
            asyncio.to_thread(measure, run_id, draft_dir, target=target, tokenizer=tokenizer, prompts=prompts),
            timeout=timeout_s,
        )
        bundle.write_json(run_id, layout.TRAINING_DRAFT_COST, cost)
    except TimeoutError:
        # The worker thread finishes on its own (bounded work); what it returns is dropped.
        log.warning("draft cost not measured", reason=f"the timing did not finish within {timeout_s:g} s")
        return None
    except Exception as exc:  # noqa: BLE001 - evidence only: nothing here may fail the step
        log.warning("draft cost not measured", reason=f"{type(exc).__name__}: {str(exc).strip()[:300]}")
        return None
    log.info("draft cost measured", relative_cost=round(cost.relative_cost, 4), tokens=cost.batch_tokens,
             threads=cost.threads)
    return cost
