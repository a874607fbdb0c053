"""`specdec bench plan RUN_ID` and `specdec training plan RUN_ID`: print a stored plan.

The plans are what an approval names (services/runtime/approval.py), so an
operator reads them before `specdec approve`. Offline: the use case
services/app/runs/plans.py reads it from the run's bundle under SPECDEC_BUNDLE_ROOT.

Exit 0 with the plan; 2 with the reason when the run has no such plan.
"""

from __future__ import annotations

import argparse
import sys

from contracts.layout import PLAN_PATHS
from services.app.runs.plans import PLAN_STEPS


def register(subparsers: argparse._SubParsersAction) -> None:
    for step in PLAN_STEPS:
        path = PLAN_PATHS[step]
        p = subparsers.add_parser(step, help=f"the {step} step's stored plan")
        steps = p.add_subparsers(dest=f"{step}_command", required=True)
        q = steps.add_parser(
            "plan", help=f"print the {step} plan of a run (what an approval of its sha256 would run)",
            description=f"Print {path} of the run's bundle: every command that would run, where, and the cleanup; "
            "with its sha256 and whether an approval covers it.",
        )
        q.add_argument("run_id")
        q.add_argument("--json", action="store_true", help="print the plan document itself (as stored)")
        q.set_defaults(func=run_plan, step=step)


def run_plan(args: argparse.Namespace) -> int:
    from services.app.runs import plans
    from services.runtime.bundle.bundle import BundleStore
    from services.runtime.settings import RuntimeSettings

    shown = plans.show_plan(BundleStore(RuntimeSettings().bundle_root), args.step, args.run_id)
    sys.stdout.write(plans.document_json(shown) if args.json else plans.describe(shown))
    return 0
