"""`specdec profile`: the profiler's offline command, the same code as the service.

Exit 0 with PROFILE.json written; 2 with a message on stderr otherwise. A rejected share past the
threshold writes no PROFILE.json (a file at --out would read as usable) and names the first rejected
lines, redacted (docs/profiler.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from services.runtime.errors import ConfigurationError

# Stands for the bundled shape names in a help text until it is printed.
_SHAPE_NAMES = "%(shape_names)s"


class _ShapeNamesHelp(argparse.HelpFormatter):
    """Names the bundled workload shapes only when `specdec profile --help` prints them:
    services.shared.text.shapes loads the redaction detectors (~0.2 s), which
    building the `specdec` parser must not wait for."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        if text is not None and _SHAPE_NAMES in text:
            from services.shared.text.shapes import SHAPES

            text = text.replace(_SHAPE_NAMES, ", ".join(SHAPES))
        return text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `profile` subcommand to the `specdec` parser."""
    from services.profiler.defaults import DEFAULT_REJECT_THRESHOLD, DEFAULT_SAMPLE_CAP

    p = subparsers.add_parser(
        "profile",
        help="profile traffic JSONL (or named workload shapes) into PROFILE.json",
        description="Profile representative traffic, or bundled workload shapes, into PROFILE.json "
        "(formats and rules: docs/profiler.md).",
        formatter_class=_ShapeNamesHelp,
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--in", dest="traffic", metavar="TRAFFIC.jsonl", help="traffic JSONL, one request a line")
    source.add_argument(
        "--aa-shapes",
        nargs="*",
        metavar="NAME",
        help=f"bundled workload shapes ({_SHAPE_NAMES}); all of them when no name is given",
    )
    p.add_argument("--out", required=True, metavar="PROFILE.json", help="where to write the profile")
    p.add_argument("--tokenizer", metavar="DIR", help="local Hugging Face tokenizer folder for lines without counts")
    p.add_argument(
        "--reject-threshold",
        type=float,
        metavar="F",
        help=f"fail when more than this share of lines is rejected (default {DEFAULT_REJECT_THRESHOLD})",
    )
    p.add_argument(
        "--sample-cap",
        type=int,
        metavar="N",
        help=f"most records measured for content mix and repetition (default {DEFAULT_SAMPLE_CAP})",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Profile, write --out atomically, print a one-line summary. Errors propagate as `SpecdecError`s."""
    from services.profiler.defaults import DEFAULT_REJECT_THRESHOLD, DEFAULT_SAMPLE_CAP
    from services.profiler.profile import profile_shapes, profile_traffic

    if args.aa_shapes is not None:
        # Traffic-only flags with shapes would be accepted and do nothing: refuse them.
        stray = [
            flag
            for flag, value in (
                ("--tokenizer", args.tokenizer),
                ("--reject-threshold", args.reject_threshold),
                ("--sample-cap", args.sample_cap),
            )
            if value is not None
        ]
        if stray:
            verb = "applies" if len(stray) == 1 else "apply"
            raise ConfigurationError(f"{', '.join(stray)} {verb} to --in traffic only: drop it with --aa-shapes")
        profile = profile_shapes(args.aa_shapes)
    else:
        profile = profile_traffic(
            args.traffic,
            tokenizer_dir=args.tokenizer,
            reject_threshold=DEFAULT_REJECT_THRESHOLD if args.reject_threshold is None else args.reject_threshold,
            sample_cap=DEFAULT_SAMPLE_CAP if args.sample_cap is None else args.sample_cap,
        )
    out = Path(args.out)
    _write_atomically(out, profile.model_dump_json(indent=2).encode() + b"\n")
    rec = profile.recommended_method
    print(
        f"wrote {out}: {profile.records.accepted} accepted, {profile.records.rejected} rejected; "
        f"recommended {rec.method} (num_speculative_tokens={rec.num_speculative_tokens})",
        file=sys.stdout,
    )
    return 0


def _write_atomically(path: Path, data: bytes) -> None:
    # temp file + rename in the same folder: a reader never sees half a profile.
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ConfigurationError(f"cannot write {path}: {exc.strerror}; check --out") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
