"""Real A/A campaigns on the embedded default, in sequential mode: the standing config served again as a candidate.

    python -m tests.perf.real_aa --campaigns 5 --concurrency 1 [--max-trials N] [--demo-bundle bundles/<run-id>]

Each campaign is infra/examples/demo-campaign.yaml with its candidates replaced by one
cell, `standing-again`, that serves exactly the standing config (no speculation), run
through `specdec demo` like the default (same model, windows, levels and regime). Nothing
trains, so what the campaign contract refuses without a training (commands.train,
source_revisions.trainer, `training` in review.pre_approve) is dropped. The rounds are
sequential: gate.min_trials trials per arm, then one more per arm and level while a
level is undecided, up to gate.max_trials (the demo's cap unless `--max-trials`; a cap
not above the minimum is refused, since that would be a fixed-trial campaign). A sound
gate never promotes it. The demo's acceptance floor stays (the contract requires a floor):
the candidate drafts nothing, so the gate calls each level inconclusive with a data
problem whatever the objective showed; the bench's round controller looks at the
objective alone, so the trials spent are the sequential rule's, and the objective's own
verdict per level is recorded: `better` at every level is a false promotion on the
objective, the figure the A/A check counts.

Written afterwards:
- tests/perf/data/real-aa.json and real-aa.md (`--record`): per campaign its exit status,
  wall time, decision, and per level the trials each arm ran, the trials the gate
  decided on, why the level stopped and the objective's interval; earlier campaigns are
  kept unless `--fresh`;
- the noise of every bundle (and of the demo's own bundle, when given) into
  tests/perf/data/demo-noise.json (`--out`; tests/perf/measure_noise.py), the input of
  the gate's power benchmark, beside the campaigns it already records unless `--fresh`.

Duration on 2 cores: about 4 minutes a campaign at concurrency 1 alone with the demo's cap
of 4 (`--concurrency 1`; measured 234 s on 2026-12-03, an A/A runs to the cap), so about
20 minutes for five; more at the demo's levels (docs/demo.md).
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from contracts import layout
from contracts.campaign import Campaign
from tests.perf import measure_noise

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "infra/examples/demo-campaign.yaml"
AGAIN = "standing-again"
FAMILY = "smollm2-aa"


class AACampaignError(ValueError):
    """The A/A campaign cannot be built from the demo campaign (the message says what to change)."""


def aa_campaign(demo: dict, concurrency: list[int] | None = None, max_trials: int | None = None) -> dict:
    """The demo campaign with one candidate that is the standing cell again (at `concurrency` instead of the
    demo's levels when given), in sequential rounds capped at `max_trials` (the demo's cap when None).
    Validated with the campaign contract, so a demo campaign this cannot follow fails here, by name."""
    data = copy.deepcopy(demo)
    standing = next((cell for cell in data["matrix"]["cells"] if cell.get("role") == "standing"), None)
    if standing is None:
        raise AACampaignError(f"{DEMO.name} has no cell with role standing to serve again")
    if concurrency:
        standing["concurrency"] = concurrency
    again = {key: value for key, value in copy.deepcopy(standing).items()
             if key in ("concurrency", "regime", "serving", "trials")}
    again.update({"cell_id": AGAIN, "role": "candidate"})
    data["matrix"]["cells"] = [standing, again]
    # No cell serves '{training.output}' now: the contract refuses a trainer and what only a training reads.
    data.get("commands", {}).pop("train", None)
    (data.get("source_revisions") or {}).pop("trainer", None)
    review = data.get("review") or {}
    if "training" in review.get("pre_approve", []):
        review["pre_approve"] = [step for step in review["pre_approve"] if step != "training"]
    gate = data.setdefault("gate", {})
    if max_trials is not None:
        gate["max_trials"] = max_trials
    first = gate.get("min_trials", 3)
    if gate.get("max_trials") is None or gate["max_trials"] <= first:
        raise AACampaignError(f"gate.max_trials {gate.get('max_trials')} is not above gate.min_trials {first}: "
                              "that is a fixed-trial campaign, not sequential rounds; give --max-trials above it")
    # Sequential rounds run min_trials as every cell's `trials` (contracts/campaign/gate.py, GateSpec.max_trials).
    standing["trials"] = again["trials"] = first
    data["family"] = FAMILY
    try:
        Campaign.model_validate(data)
    except ValueError as exc:
        raise AACampaignError(f"the A/A campaign built from {DEMO.name} is refused: {exc}") from exc
    return data


def campaign_record(bundle: Path | None, exit_code: int, wall_s: float) -> dict[str, Any]:
    """One campaign: exit, wall time, decision and, per level, each arm's trials and why the level stopped."""
    record: dict[str, Any] = {"run_id": bundle.name if bundle else None, "exit": exit_code, "wall_s": round(wall_s, 1),
                              "decision": None, "winner": None, "max_trials": None, "levels": []}
    path = bundle / layout.DECISION if bundle else None
    if path is None or not path.is_file():
        return record
    decision = json.loads(path.read_bytes())
    record.update(decision=decision.get("decision"), winner=decision.get("winner"),
                  max_trials=(decision.get("thresholds") or {}).get("max_trials"))
    for candidate in decision.get("candidates", []):
        for level in candidate.get("levels", []):
            interval = (level.get("objective") or {}).get("interval") or {}
            record["levels"].append({
                "candidate": candidate["candidate"], "concurrency": level.get("concurrency"),
                "trials_standing": level["baseline"]["trials"], "trials_again": level["candidate"]["trials"],
                "trials_used": level.get("trials_used"), "stopped": level.get("stopped"),
                "outcome": level.get("outcome"), "verdict": (level.get("objective") or {}).get("verdict"),
                "interval_pct": [interval.get("low_pct"), interval.get("high_pct")] if interval else None,
            })
    return record


def table(records: list[dict[str, Any]]) -> str:
    """Markdown: one row per campaign and level."""
    lines = ["| run | exit | wall | decision | level | trials standing / again | decided on | stopped | "
             "objective verdict, interval |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for rec in records:
        for level in rec["levels"] or [{}]:
            interval = level.get("interval_pct")
            shown = "n/a" if not interval or None in interval else f"{interval[0]:+.1f}..{interval[1]:+.1f} %"
            lines.append(
                f"| {rec['run_id']} | {rec['exit']} | {rec['wall_s']:.0f} s | {rec['decision']} "
                f"(cap {rec['max_trials']}) | c={level.get('concurrency', 'n/a')} | "
                f"{level.get('trials_standing', '-')} / "
                f"{level.get('trials_again', '-')} | {level.get('trials_used', '-')} | {level.get('stopped') or '-'} "
                f"| {level.get('verdict') or '-'}, {shown} |"
            )
    decided = [rec for rec in records if rec["decision"] is not None]
    promoted = sum(rec["decision"] == "promote" for rec in decided)
    better = sum(bool(rec["levels"]) and all(lvl["verdict"] == "better" for lvl in rec["levels"]) for rec in decided)
    lines.append("")
    lines.append(f"{promoted} of {len(decided)} A/A campaigns with a decision promoted; {better} had the objective "
                 f"better at every level (a false promotion on the objective); {len(records) - len(decided)} "
                 "without a decision.")
    return "\n".join(lines) + "\n"


def write_record(records: list[dict[str, Any]], out: Path, setup: str, *, fresh: bool) -> list[dict[str, Any]]:
    """Store the campaigns in `out` (JSON) and `out` with .md (the table), after the ones already there."""
    if not fresh and out.is_file():
        earlier = json.loads(out.read_text())["campaigns"]
        mine = {rec["run_id"] for rec in records}
        records = [rec for rec in earlier if rec["run_id"] not in mine] + records
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"setup": setup, "campaigns": records}, indent=2) + "\n")
    out.with_suffix(".md").write_text(f"Real A/A campaigns (tests/perf/real_aa.py): {setup}\n\n{table(records)}")
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--campaigns", type=int, default=5)
    parser.add_argument("--demo-bundle", type=Path, action="append", default=[],
                        help="a demo run's bundle to include in the noise figures")
    parser.add_argument("--bundles", type=Path, default=ROOT / "bundles")
    parser.add_argument("--out", type=Path, default=ROOT / "tests/perf/data/demo-noise.json",
                        help="the noise record (tests/perf/measure_noise.py)")
    parser.add_argument("--record", type=Path, default=ROOT / "tests/perf/data/real-aa.json",
                        help="the campaigns' trials and decisions (JSON; the table beside it as .md)")
    parser.add_argument("--concurrency", type=int, action="append", default=[],
                        help="levels of the A/A cells (default: the demo's). One level is the stricter test: "
                             "a campaign promotes a candidate better at every level")
    parser.add_argument("--max-trials", type=int,
                        help="the rounds' cap per arm and level (default: the demo's gate.max_trials)")
    parser.add_argument("--max-output-tokens", type=int,
                        help="the load's output cap instead of the demo's (longer windows: does the noise drop?)")
    parser.add_argument("--fresh", action="store_true",
                        help="replace --out and --record instead of adding these campaigns to the ones they record")
    args = parser.parse_args(argv)
    try:
        campaign = aa_campaign(yaml.safe_load(DEMO.read_text()), args.concurrency or None, args.max_trials)
    except AACampaignError as exc:
        print(f"real_aa: {exc}", file=sys.stderr)
        return 2
    if args.max_output_tokens:
        campaign["matrix"]["load"]["max_output_tokens"] = args.max_output_tokens
    load, cell, gate = campaign["matrix"]["load"], campaign["matrix"]["cells"][0], campaign["gate"]
    setup = (f"{DEMO.name}: {campaign['target']['checkpoint']}, {load['num_prompts']} prompts x "
             f"{load['max_output_tokens']} tokens, {load['endpoint']} endpoint, levels {cell['concurrency']}, "
             f"sequential rounds {gate['min_trials']}..{gate['max_trials']} trials per arm, regime {cell['regime']}")
    runs: list[Path] = []
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="specdec-aa-") as tmp:
        path = Path(tmp) / "aa-campaign.yaml"
        path.write_text(yaml.safe_dump(campaign, sort_keys=False))
        for index in range(args.campaigns):
            before = set(args.bundles.glob(f"{FAMILY}-*")) if args.bundles.is_dir() else set()
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "services.cli.demo", "--campaign", str(path)],
                                  cwd=ROOT, check=False)
            wall = time.monotonic() - started
            new = sorted(set(args.bundles.glob(f"{FAMILY}-*")) - before)
            record = campaign_record(new[-1] if new else None, done.returncode, wall)
            record["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
            records.append(record)
            print(f"A/A campaign {index + 1}/{args.campaigns}: exit {done.returncode}, {wall:.0f} s, "
                  f"bundle {new[-1] if new else 'none'}, decision {record['decision']}", flush=True)
            runs += new[-1:]
    every = write_record(records, args.record, setup, fresh=args.fresh)
    print(table(every), end="")
    if not runs and not args.demo_bundle:
        return 1
    noise = measure_noise.main([*map(str, [*args.demo_bundle, *runs]), "--out", str(args.out), "--setup", setup,
                                *([] if args.fresh else ["--merge"])])
    return noise or (0 if all(rec["exit"] == 0 for rec in records) else 1)


if __name__ == "__main__":
    sys.exit(main())
