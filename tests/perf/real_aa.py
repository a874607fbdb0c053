"""Real A/A campaigns on the embedded default: the standing config served again as a candidate.

    python -m tests.perf.real_aa --campaigns 5 [--demo-bundle bundles/<run-id>]

Each campaign is infra/examples/demo-campaign.yaml with its candidates replaced by one
cell, `standing-again`, that serves exactly the standing config (no speculation, no
training), run through `specdec demo` like the default (same model, windows, levels,
trials and regime). A sound gate never promotes it. Afterwards the noise of every
bundle (and of the demo's own bundle, when given) is written to
tests/perf/data/demo-noise.json (tests/perf/measure_noise.py, beside the campaigns it
already records unless `--fresh`), the input of the gate's power benchmark. About 10 minutes a campaign on 2 cores at the demo's levels, 7 at
concurrency 1 alone (`--concurrency 1`).
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tests.perf import measure_noise

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "infra/examples/demo-campaign.yaml"


def aa_campaign(demo: dict, concurrency: list[int] | None = None) -> dict:
    """The demo campaign with one candidate that is the standing cell again (at `concurrency`
    instead of the demo's levels when given)."""
    data = copy.deepcopy(demo)
    standing = next(cell for cell in data["matrix"]["cells"] if cell.get("role") == "standing")
    if concurrency:
        standing["concurrency"] = concurrency
    again = {key: value for key, value in copy.deepcopy(standing).items()
             if key in ("concurrency", "regime", "serving", "trials")}
    again.update({"cell_id": "standing-again", "role": "candidate"})
    data["matrix"]["cells"] = [standing, again]
    # commands.train stays (a traffic campaign needs one); no cell names a draft, so nothing trains.
    data["family"] = "smollm2-aa"
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--campaigns", type=int, default=5)
    parser.add_argument("--demo-bundle", type=Path, action="append", default=[],
                        help="a demo run's bundle to include in the noise figures")
    parser.add_argument("--bundles", type=Path, default=ROOT / "bundles")
    parser.add_argument("--out", type=Path, default=ROOT / "tests/perf/data/demo-noise.json")
    parser.add_argument("--concurrency", type=int, action="append", default=[],
                        help="levels of the A/A cells (default: the demo's). One level is the stricter test: "
                             "a campaign promotes a candidate better at every level")
    parser.add_argument("--max-output-tokens", type=int,
                        help="the load's output cap instead of the demo's (longer windows: does the noise drop?)")
    parser.add_argument("--fresh", action="store_true",
                        help="replace --out instead of adding these campaigns to the ones it records")
    args = parser.parse_args(argv)
    campaign = aa_campaign(yaml.safe_load(DEMO.read_text()), args.concurrency or None)
    if args.max_output_tokens:
        campaign["matrix"]["load"]["max_output_tokens"] = args.max_output_tokens
    runs: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="specdec-aa-") as tmp:
        path = Path(tmp) / "aa-campaign.yaml"
        path.write_text(yaml.safe_dump(campaign, sort_keys=False))
        for index in range(args.campaigns):
            before = set(args.bundles.glob("smollm2-aa-*")) if args.bundles.is_dir() else set()
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "services.cli.demo", "--campaign", str(path)],  # noqa: S603
                                  cwd=ROOT, check=False)
            new = sorted(set(args.bundles.glob("smollm2-aa-*")) - before)
            print(f"A/A campaign {index + 1}/{args.campaigns}: exit {done.returncode}, "
                  f"{time.monotonic() - started:.0f} s, bundle {new[-1] if new else 'none'}", flush=True)
            runs += new[-1:]
    setup = (f"{DEMO.name}: {campaign['target']['checkpoint']}, {campaign['matrix']['load']['num_prompts']} prompts x "
             f"{campaign['matrix']['load']['max_output_tokens']} tokens, {campaign['matrix']['load']['endpoint']} endpoint, "
             f"levels {campaign['matrix']['cells'][0]['concurrency']}, {campaign['matrix']['cells'][0]['trials']} trials, "
             f"regime {campaign['matrix']['cells'][0]['regime']}")
    return measure_noise.main([*map(str, [*args.demo_bundle, *runs]), "--out", str(args.out), "--setup", setup,
                              *([] if args.fresh else ["--merge"])])


if __name__ == "__main__":
    sys.exit(main())
