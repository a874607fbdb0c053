"""The profiler service predicts a suffix cell's acceptance once the corpus service has built the corpus:
both services through a real Redis on the bundled sample traffic, with a real tokenizer trained here on that
traffic (a byte-level BPE: the target checkpoint is a build artifact this lane does not make)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import yaml
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from contracts import layout
from contracts.artifacts.suffix import SuffixPrediction
from contracts.campaign import Campaign
from services.app.campaign.prepare import absolutize
from services.runtime.bundle.bundle import ArtifactMissing, BundleStore
from tests.integration.test_profile_corpus_services import submit
from tests.support.campaigns import without_trainer
from tests.support.services import running, wait_events

ROOT = Path(__file__).resolve().parents[2]
TRAFFIC = ROOT / "infra/examples/sample-traffic.jsonl"


def _tokenizer(folder: Path) -> Path:
    texts = [line for line in TRAFFIC.read_text().splitlines() if line.strip()]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator([json.dumps(json.loads(t)) for t in texts],
                            trainers.BpeTrainer(vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder


async def test_the_profiler_writes_the_suffix_prediction_after_the_corpus(settings, tmp_path):
    run_id = "toy-20261202-030303-abcdef"
    bundle = BundleStore(settings.bundle_root)
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["target"]["checkpoint"] = str(_tokenizer(tmp_path / "target"))
    data["corpus"] = {"size": 120, "heldout_share": 0.2, "seed": 0}
    cells = [c for c in data["matrix"]["cells"] if c["cell_id"] != "draft-k3"]
    cells[1]["cell_id"] = "suffix-k3"
    cells[1]["serving"]["speculative"] = {"method": "suffix", "num_speculative_tokens": 3}
    data["matrix"]["cells"] = cells
    campaign = absolutize(Campaign.model_validate(without_trainer(data)), ROOT)
    async with contextlib.AsyncExitStack() as stack:
        profiler = await stack.enter_async_context(running("profiler", settings))
        await stack.enter_async_context(running("corpus", settings))
        await submit(profiler, bundle, run_id, campaign)
        events = await wait_events(settings, {"corpus.completed"}, run_id=run_id, timeout_s=120)
        for _ in range(240):  # the simulator's imports take seconds
            with contextlib.suppress(ArtifactMissing):
                written = SuffixPrediction.model_validate(bundle.read_json(run_id, layout.PROFILE_SUFFIX))
                break
            await asyncio.sleep(0.5)
        else:
            raise AssertionError(f"no {layout.PROFILE_SUFFIX} 120 s after corpus.completed")
    assert written.unavailable_reason is None, written.unavailable_reason
    (cell,) = written.cells
    assert cell.cell_id == "suffix-k3" and cell.requests == events["corpus.completed"]["heldout_records"]
    assert cell.drafts > 0 and 0 < cell.accepted_tokens <= cell.draft_tokens <= 3 * cell.drafts
