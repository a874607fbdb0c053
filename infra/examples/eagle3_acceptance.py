"""A saved EAGLE-3 head's offline acceptance, estimated on its own (without training it again).

    .venv-speculators/bin/python infra/examples/eagle3_acceptance.py --head HEAD_DIR --target TARGET \\
        --heldout CORPUS-heldout.jsonl

train_eagle3.py with `--heldout` writes the same estimate as it trains; this runs it for a head
saved earlier (its own aux layers and k from its config.json), with train_eagle3.offline_estimate,
and writes `offline-acceptance.json` (offline_acceptance.py's definition and file) into HEAD_DIR.
It prints the file's name and headline figures as one JSON line; exit 2 with one line on stderr
when the inputs cannot be used.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from offline_acceptance import write
from train_eagle3 import offline_estimate
from trainer_data import ExampleError


def load_head(head_dir: Path, target_dir: Path):
    """A saved head, in float32, its verifier weights (norm, lm_head) read from `target_dir`."""
    from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig

    config = Eagle3SpeculatorConfig.from_pretrained(str(head_dir))
    config.speculators_config.verifier.name_or_path = str(target_dir)  # the path it was trained with may be relative
    config.transformer_layer_config._attn_implementation = "sdpa"  # not saved; flex attention needs a GPU
    return Eagle3DraftModel.from_pretrained(str(head_dir), config=config).float(), config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--head", type=Path, required=True, help="the head's folder (speculators format)")
    parser.add_argument("--target", type=Path, required=True, help="the target checkpoint folder")
    parser.add_argument("--heldout", type=Path, required=True, help="corpus JSONL with heldout records")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="target answer length (default 64)")
    parser.add_argument("--gen-batch", type=int, default=48, help="prompts per target batch (default 48)")
    parser.add_argument("--token-budget", type=int, default=2048, help="tokens per packed row (default 2048)")
    args = parser.parse_args(argv)
    if not (args.head / "config.json").is_file():
        print(f"eagle3_acceptance: no head at {args.head} (config.json missing)", file=sys.stderr)
        return 2
    head, config = load_head(args.head, args.target)
    k = config.speculators_config.proposal_methods[0].speculative_tokens
    try:
        estimated = offline_estimate(head, args.target, args.heldout,
                                     aux_layers=config.eagle_aux_hidden_state_layer_ids, ttt_steps=k,
                                     max_new_tokens=args.max_new_tokens, gen_batch=args.gen_batch,
                                     token_budget=args.token_budget,
                                     log=lambda m: print(f"eagle3_acceptance: {m}", file=sys.stderr))
    except ExampleError as exc:
        print(f"eagle3_acceptance: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(write(args.head, estimated)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
