"""`specdec next RUN_ID`: the use case of services/app/campaign/next_run.py, offline (no Redis).

Writes the campaign that proves or rejects the run's predicted k per concurrency (the standing cell
again, the best fixed k and the scheduled cell; same target, traffic, corpus and draft, reused by its
training input key) to `--out FILE` (default ./RUN_ID-next.yaml, never overwritten) and prints the
path, the cells and the prediction per level. Nothing is submitted: `specdec submit FILE` starts the
new run. Exit status 0; 2 with the reason on stderr.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "next",
        help="write the campaign that proves a run's predicted k per concurrency (a new run, nothing pooled)",
        description="From the run's bundle: the k per concurrency its report predicts (vLLM's "
        "num_speculative_tokens_per_batch_size), written as a new campaign that benches the standing cell again "
        "beside the best fixed k and the scheduled cell, reusing the run's target, traffic, corpus and draft. "
        "Prints the file; submit it with specdec submit.",
    )
    p.add_argument("run_id")
    p.add_argument("--out", type=Path, metavar="FILE",
                   help="where to write the campaign (default ./RUN_ID-next.yaml); an existing file is refused")
    p.set_defaults(func=run_next)


def run_next(args: argparse.Namespace) -> int:
    from services.app.campaign.next_run import write_next
    from services.runtime.bundle.bundle import BundleStore
    from services.runtime.settings import RuntimeSettings

    found = write_next(BundleStore(RuntimeSettings().bundle_root), args.run_id, args.out)
    print(found.path)
    print(f"cells: {', '.join(found.cells)}; schedule {found.schedule}")
    for line in found.prediction:
        print(f"  {line}")
    if found.draft:
        print(f"draft: {found.draft}")
    print(f"submit it for a new run: specdec submit {found.path}")
    return 0
