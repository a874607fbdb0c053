"""Suffix-decoding acceptance predicted offline, before anything is served (contracts/artifacts/suffix.py).

Each suffix cell is replayed over the corpus's heldout split with arctic-inference's own simulator, the
cache set up as vLLM sets up its proposer and starting empty, as a fresh server's does. It predicts one
pass with the traffic's own completions, so the served arm may differ; the gate never reads it
(docs/profiler.md#suffix-prediction)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import orjson

from contracts.artifacts.corpus import CorpusRecord
from contracts.artifacts.suffix import SUFFIX_VLLM_DEFAULTS, SuffixCellPrediction, SuffixPrediction
from contracts.campaign import Campaign, Matrix, SpeculativeConfig
from services.shared.text.chat_template import load_chat_template


def suffix_cells(campaign: Campaign) -> list[tuple[str, SpeculativeConfig]]:
    """(cell_id, config) of every suffix cell of an inline matrix (submit stores a matrix file inline)."""
    if not isinstance(campaign.matrix, Matrix):
        return []
    return [(c.cell_id, c.serving.speculative) for c in campaign.matrix.cells
            if c.serving.speculative is not None and c.serving.speculative.method == "suffix"]


def _unavailable(why: str, package: str | None = None) -> SuffixPrediction:
    return SuffixPrediction(package=package, tokens=None, cells=[], unavailable_reason=why)


def _pairs(corpus: bytes, tokenizer_dir: str) -> tuple[list[tuple[Any, Any]], str]:
    """(prompt ids, reference completion ids) of every heldout record with a completion, and how."""
    import numpy as np
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(tokenizer_dir) / "tokenizer.json"))
    template = load_chat_template(tokenizer_dir)
    pairs = []
    for line in corpus.splitlines():
        if not line.strip():
            continue
        record = CorpusRecord.model_validate(orjson.loads(line))
        if record.split != "heldout" or not record.reference_completion:
            continue
        turns = [{"role": m.role, "content": m.content} for m in record.messages]
        text = (
            template.render(turns, add_generation_prompt=True) if template else "\n\n".join(t["content"] for t in turns)
        )
        prompt = tokenizer.encode(text, add_special_tokens=template is None).ids
        output = tokenizer.encode(record.reference_completion, add_special_tokens=False).ids
        pairs.append((np.asarray(prompt, dtype=np.int32), np.asarray(output, dtype=np.int32)))
    how = (f"{tokenizer_dir}/tokenizer.json; prompts through its chat template" if template
           else f"{tokenizer_dir}/tokenizer.json; prompts as their messages' text (no chat template)")
    return pairs, how


def _simulate(cell_id: str, spec: SpeculativeConfig, pairs: list[tuple[Any, Any]]) -> SuffixCellPrediction:
    from arctic_inference.suffix_decoding import SuffixDecodingCache
    from arctic_inference.suffix_decoding.simulator import suffix_decode

    keys = {key: getattr(spec, key) if getattr(spec, key) is not None else default
            for key, default in SUFFIX_VLLM_DEFAULTS.items()}
    k = spec.num_speculative_tokens
    cache = SuffixDecodingCache(max_tree_depth=keys["suffix_decoding_max_tree_depth"],
                                max_cached_requests=keys["suffix_decoding_max_cached_requests"])
    steps = drafts = drafted = accepted = output = 0
    for request_id, (prompt, completion) in enumerate(pairs):
        for step in suffix_decode(cache, request_id, prompt, completion, k,
                                  max_spec_factor=keys["suffix_decoding_max_spec_factor"],
                                  min_token_prob=keys["suffix_decoding_min_token_prob"],
                                  use_tree_spec=False, use_cached_prompt=True):
            steps += 1
            drafts += step["num_spec_toks"] > 0
            drafted += step["num_spec_toks"]
            accepted += step["num_accept_toks"]
        output += len(completion)
    return SuffixCellPrediction(
        cell_id=cell_id, num_speculative_tokens=k, max_tree_depth=keys["suffix_decoding_max_tree_depth"],
        max_cached_requests=keys["suffix_decoding_max_cached_requests"],
        max_spec_factor=keys["suffix_decoding_max_spec_factor"], min_token_prob=keys["suffix_decoding_min_token_prob"],
        requests=len(pairs), output_tokens=output, steps=steps, drafts=drafts, draft_tokens=drafted,
        accepted_tokens=accepted, acceptance_rate=accepted / drafted if drafted else None,
        mean_acceptance_length=1 + accepted / drafts if drafts else None,
    )


def predict(campaign: Campaign, corpus: bytes | None, tokenizer_dir: str | None) -> SuffixPrediction | None:
    """The prediction for the campaign's suffix cells; None when it has none (nothing is written then)."""
    cells = suffix_cells(campaign)
    if not cells:
        return None
    try:
        package = f"arctic-inference=={version('arctic-inference')}"
        import arctic_inference.suffix_decoding.simulator  # noqa: F401 - its imports (pandas) must load
    except (PackageNotFoundError, ImportError) as exc:
        return _unavailable(f"arctic-inference's simulator cannot be imported here ({exc}): make setup installs "
                            "the suffix extra")
    if corpus is None:
        return _unavailable("no corpus: the campaign profiles shapes, which have no prompts with completions", package)
    if tokenizer_dir is None:
        return _unavailable("the target has no tokenizer.json: prompts and completions cannot become the tokens "
                            "the suffix trees match on", package)
    pairs, how = _pairs(corpus, tokenizer_dir)
    if not pairs:
        return _unavailable("the corpus's heldout split has no record with a reference completion", package)
    return SuffixPrediction(package=package, tokens=how, cells=[_simulate(c, s, pairs) for c, s in cells],
                            unavailable_reason=None)
