"""The profiler's offline suffix prediction (services/profiler/suffix_prediction.py) with arctic-inference's
own simulator, on a corpus written as the corpus step writes it and a real tokenizer (a word-level
tokenizer.json built here: the target's is a build artifact)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml
from tokenizers import Tokenizer, models, pre_tokenizers

from contracts import layout
from contracts.artifacts.corpus import CorpusRecord
from contracts.artifacts.suffix import SuffixPrediction
from contracts.campaign import Campaign
from services.profiler.app import run_suffix_prediction
from services.profiler.suffix_prediction import predict
from services.runtime.bundle.bundle import BundleStore
from tests.support.campaigns import without_trainer

ROOT = Path(__file__).resolve().parents[3]
ANSWER = "the answer is forty two and the answer is forty two because six times seven is forty two"


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> str:
    words = sorted(set((ANSWER + " what is six times seven say it again please q0 q1 q2 q3 q4 q5 q6 q7").split()))
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    return str(tmp_path)


def _corpus(n: int = 8, *, completion: str | None = ANSWER) -> bytes:
    lines = []
    for i in range(n):
        record = CorpusRecord(
            id=hashlib.sha256(str(i).encode()).hexdigest()[:16],
            messages=[{"role": "user", "content": f"q{i} what is six times seven say it again please"}],
            reference_completion=completion,
            input_tokens=9,
            output_tokens=17,
            content_class="chat",
            split="heldout" if i % 2 else "train",
        )
        lines.append(record.model_dump_json())
    return "\n".join(lines).encode()


def _campaign(**suffix) -> Campaign:
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    cells = [c for c in data["matrix"]["cells"] if c["cell_id"] != "draft-k3"]
    cells[1]["cell_id"] = "suffix-k3"
    cells[1]["serving"]["speculative"] = {"method": "suffix", "num_speculative_tokens": 3, **suffix}
    data["matrix"]["cells"] = cells
    return Campaign.model_validate(without_trainer(data))


def test_repeated_completions_are_predicted_to_be_drafted_from_the_cache(tokenizer_dir):
    found = predict(_campaign(suffix_decoding_max_spec_factor=2.0), _corpus(), tokenizer_dir)
    assert found is not None and found.unavailable_reason is None and found.package == "arctic-inference==0.3.0"
    (cell,) = found.cells
    assert (cell.cell_id, cell.num_speculative_tokens, cell.max_spec_factor, cell.max_tree_depth) == (
        "suffix-k3",
        3,
        2.0,
        24,
    )
    assert cell.requests == 4 and cell.output_tokens == 4 * len(ANSWER.split())
    assert 0 < cell.accepted_tokens <= cell.draft_tokens <= 3 * cell.drafts
    # The first request drafts from its own prompt only; the later ones find its completion cached.
    assert cell.acceptance_rate > 0.5 and cell.steps < cell.output_tokens


def test_no_cache_across_requests_predicts_less(tokenizer_dir):
    cached = predict(_campaign(), _corpus(), tokenizer_dir).cells[0]
    uncached = predict(_campaign(suffix_decoding_max_cached_requests=0), _corpus(), tokenizer_dir).cells[0]
    assert uncached.accepted_tokens < cached.accepted_tokens


def test_without_completions_or_a_tokenizer_the_reason_is_written(tokenizer_dir):
    assert (
        "no record with a reference completion"
        in predict(_campaign(), _corpus(completion=None), tokenizer_dir).unavailable_reason
    )
    assert "tokenizer.json" in predict(_campaign(), _corpus(), None).unavailable_reason
    assert "shapes" in predict(_campaign(), None, tokenizer_dir).unavailable_reason


def test_a_campaign_without_a_suffix_cell_gets_no_prediction(tokenizer_dir):
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    assert predict(Campaign.model_validate(data), _corpus(), tokenizer_dir) is None


def test_the_profiler_writes_it_into_the_bundle_on_the_corpus_event(tmp_path, tokenizer_dir):
    from contracts.events import CorpusCompleted

    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    run = "toy-20261202-010101-abcdef"
    campaign = _campaign().model_copy(update={"target": _campaign().target.model_copy(
        update={"checkpoint": tokenizer_dir})})
    bundle.write_json(run, layout.CAMPAIGN, campaign)
    ref = bundle.write_bytes(run, layout.CORPUS, _corpus())
    event = CorpusCompleted(run_id=run, producer="test", corpus=ref, manifest=None, train_records=4, heldout_records=4)
    run_suffix_prediction(bundle, event)
    written = SuffixPrediction.model_validate(bundle.read_json(run, layout.PROFILE_SUFFIX))
    assert written.cells[0].cell_id == "suffix-k3" and written.cells[0].accepted_tokens > 0
