"""`specdec corpus`: the corpus step's offline command, the same code as the service.

Exit 0 with the corpus and its manifest written; 3 when the profile is shapes-only (the service records
that as skipped); 2 on any other error, with a redacted message. Nothing is written but on 0
(docs/corpus.md).
"""

from __future__ import annotations

import argparse
import sys

EXIT_SKIPPED = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `corpus` subcommand to the `specdec` parser."""
    p = subparsers.add_parser(
        "corpus",
        help="build the matched, redacted, deduplicated corpus from a profile and its traffic",
        description="Sample traffic into CORPUS.jsonl so its lengths and content mix match PROFILE.json, "
        "with train/heldout split, redaction, dedup and a chat-template render check (docs/corpus.md).",
    )
    p.add_argument("--profile", required=True, metavar="PROFILE.json", help="profile written by `specdec profile`")
    p.add_argument("--traffic", required=True, metavar="TRAFFIC.jsonl", help="traffic JSONL to sample records from")
    p.add_argument("--out", required=True, metavar="CORPUS.jsonl", help="corpus to write (manifest beside it)")
    p.add_argument(
        "--tokenizer", metavar="DIR",
        help="local tokenizer folder of the target: counts lines without counts, and its chat template "
        "is render-checked",
    )
    p.add_argument(
        "--size", type=int, metavar="N",
        help="records wanted (default: the largest corpus whose strata stay within 0.05 total variation "
        "of the profile's)",
    )
    p.add_argument(
        "--heldout-share", type=float, default=0.1, metavar="F", help="share of the heldout split (default 0.1)"
    )
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of sampling and split (default 0)")
    p.add_argument(
        "--max-model-len", type=int, metavar="N",
        help="the target's maximum model length: longer records are left out and the render check "
        "enforces it (default: the tokenizer's model_max_length, else unchecked)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the corpus and print a summary. Errors other than a skip propagate as `SpecdecError`s."""
    from services.corpus.build import build_corpus
    from services.corpus.errors import CorpusSkipped

    try:
        manifest = build_corpus(
            args.profile,
            args.traffic,
            args.out,
            tokenizer_dir=args.tokenizer,
            size=args.size,
            heldout_share=args.heldout_share,
            seed=args.seed,
            max_model_len=args.max_model_len,
        )
    except CorpusSkipped as exc:
        print(f"specdec corpus: skipped: {exc.reason}", file=sys.stderr)
        return EXIT_SKIPPED
    d = manifest.distance
    ks = ", ".join(
        f"{name} {value:.3f}" for name, value in (("KS input", d.ks_input_tokens), ("KS output", d.ks_output_tokens),
                                                 ("TV class", d.tv_content_class)) if value is not None
    )
    redacted = sum(manifest.redaction.counts.values())
    print(
        f"wrote {args.out}: {manifest.records.train} train, {manifest.records.heldout} heldout; {ks}; "
        f"{redacted} redaction(s); render check {manifest.render_check.status}",
        file=sys.stdout,
    )
    return 0
