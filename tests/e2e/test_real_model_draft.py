"""The distilled draft on the real model: `specdec demo --campaign infra/examples/draft-campaign.yaml`.

The demo's trainer slot holds the EAGLE-3 head (test_real_model.py); the draft model that
the example trainer infra/examples/train_draft.py distils from SmolLM2-135M-Instruct runs
in a campaign of its own: the standing config against `draft-k3`, served with
`method: draft_model`, warm-interleaved, against this test's own Redis stream prefix and
bundle root. Asserted from the bundle: the campaign decides draft-k3 by the gate's rule,
every launch served the trained draft (the engine's read-back), and the trainer-proxy
timed the draft against the target (training/draft-cost.json).

About 10 minutes on 2 cores with the model converted (training about 5, two servers'
blocks); `make test-models` runs it (marked `models`: not part of `make test`).
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
CAMPAIGN = ROOT / "infra/examples/draft-campaign.yaml"
pytestmark = [pytest.mark.e2e, pytest.mark.models, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def draft_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    work = tmp_path_factory.mktemp("real-draft")
    env = {**os.environ, "SPECDEC_STREAM_PREFIX": f"specdec-draft-{work.name}",
           "SPECDEC_BUNDLE_ROOT": str(work / "bundles")}
    done = subprocess.run([sys.executable, "-m", "services.cli.demo", "--campaign", str(CAMPAIGN), "--timeout", "3000"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    print(done.stdout[-6000:])
    runs = sorted((work / "bundles").glob("smollm2-*"))
    assert runs, f"no bundle written; stderr tail: {done.stderr[-3000:]}"
    return done, runs[-1]


def test_the_draft_campaign_decides_draft_k3(draft_run) -> None:
    done, bundle = draft_run
    assert done.returncode == 0, done.stdout[-4000:]
    assert "campaign complete" in done.stdout
    decision = json.loads((bundle / layout.DECISION).read_bytes())
    [candidate] = decision["candidates"]
    assert candidate["candidate"] == "draft-k3"
    assert [level["concurrency"] for level in candidate["levels"]] == [1, 4]
    if candidate["outcome"] == "win":  # the gate's rule: a win is `better` at every level
        assert all(level["objective"]["verdict"] == "better" for level in candidate["levels"]), candidate
    expected = {"win": "promote", "reject": "reject"}.get(candidate["outcome"], "inconclusive")
    assert decision["decision"] == expected, (decision["decision"], candidate["outcome"])


def test_every_launch_served_the_trained_draft(draft_run) -> None:
    _, bundle = draft_run
    launched = json.loads((bundle / layout.TRAINING_ARGV).read_bytes())["argv"]
    assert launched[:2] == ["python", "infra/examples/train_draft.py"]
    checks = [json.loads(p.read_bytes()) for p in bundle.glob("bench/draft-k3/**/engine-config.json")]
    assert checks and all(c["effective"]["speculative_method"] == "draft_model" for c in checks)
    assert all(row["ok"] for c in checks for row in c["checks"])
    results = [json.loads(p.read_bytes()) for p in bundle.glob("bench/draft-k3/**/result-*.json")]
    assert results and sum(r["spec_decode"]["num_accepted_tokens"] for r in results) > 0
    cost = json.loads((bundle / layout.TRAINING_DRAFT_COST).read_bytes())
    assert 0 < cost["relative_cost"] < 1, cost  # 2 of the target's 30 layers
