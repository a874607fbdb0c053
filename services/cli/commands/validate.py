"""`specdec validate CAMPAIGN.yaml [--json]`: every check submit makes, with no run created.

Exit 0 when submit would accept the campaign, 2 when not (every problem named at
once). Nothing is stored and nothing is published: no bundle folder, no event,
no Redis needed. `--json` prints the whole result (services/app/campaign/validate.py
`Validation`): problems, warnings, inert fields, and each cell's declared serving
config as specdec read it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_REFUSED = 2


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "validate", help="check a campaign as submit would, creating nothing (exit 0: accepted, 2: refused)",
        description="Run every check `specdec submit` runs on a campaign file and report every problem at once. "
        "Creates no run and no bundle, publishes nothing, needs no Redis.",
    )
    p.add_argument("campaign", help="campaign YAML file (see infra/examples/campaign.yaml)")
    p.add_argument("--json", action="store_true",
                   help="print problems, warnings, inert fields and each cell's declared serving config as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from services.app.campaign.validate import validate

    result = validate(Path(args.campaign))
    if args.json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    elif result.accepted:
        lines = [f"campaign {result.campaign}: would be accepted ({len(result.cells)} cell(s))"]
        lines += [f"  warning: {w}" for w in result.warnings]
        lines += [f"  cell {c.cell_id} ({c.role}): {_serving(c.serving)}" for c in result.cells]
        print("\n".join(lines))
    else:
        print(f"campaign {result.campaign} would be refused ({len(result.problems)} problem(s)):")
        print("\n".join(f"  - {p}" for p in result.problems))
    return 0 if result.accepted else EXIT_REFUSED


def _serving(serving: dict) -> str:
    import json

    return ", ".join(f"{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in serving.items() if v is not None)
