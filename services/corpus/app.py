"""Corpus entrypoint: profile.completed / corpus.requested -> corpus.completed.

Builds the corpus in a scratch folder, then stores it, its manifest and its two split files write-once
under corpus/ (docs/corpus.md#in-a-campaigns-bundle). `CorpusSkipped` (a shapes-only campaign) completes
the step as skipped with the reason; every other error is a StepFailed, its message redacted when built."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import orjson

from contracts import layout
from contracts.campaign import TrafficFile
from contracts.catalogue import CORPUS
from contracts.envelope import Event
from contracts.events import CorpusCompleted
from services.corpus.build import build_corpus
from services.corpus.errors import CorpusSkipped
from services.runtime.bundle.bundle import BundleStore
from services.runtime.campaign import load_campaign
from services.runtime.delivery.route import Route, StepContext
from services.runtime.resources import Resources
from services.runtime.target import tokenizer_folder

NAME = CORPUS
# What completes the step (services/runtime/delivery/adopt.py): recorded in the bundle, re-emitted instead of re-run.
DONE_BY = (CorpusCompleted.SCHEMA,)


def split_files(corpus: bytes) -> dict[str, bytes]:
    splits: dict[str, list[bytes]] = {"train": [], "heldout": []}
    for line in corpus.splitlines():
        if line.strip():
            splits[orjson.loads(line)["split"]].append(line + b"\n")
    return {name: b"".join(lines) for name, lines in splits.items()}


def run_corpus(bundle: BundleStore, event: Event, producer: str) -> CorpusCompleted:
    run_id = event.run_id
    campaign = load_campaign(bundle, run_id)
    if not isinstance(campaign.traffic, TrafficFile):
        reason = "shapes-only campaign: no traffic to build a corpus from; candidates need no training"
        return event.caused(CorpusCompleted, producer=producer, corpus=None, manifest=None,
                            train_records=0, heldout_records=0, skipped_reason=reason)
    profile = bundle.resolve(bundle.ref(run_id, layout.PROFILE).uri)
    with tempfile.TemporaryDirectory(prefix="specdec-corpus-") as scratch:
        # Built under the bundle's own file name: the manifest records it (`corpus_file`).
        out = Path(scratch) / Path(layout.CORPUS).name
        try:
            manifest = build_corpus(
                profile, campaign.traffic.path, out,
                tokenizer_dir=tokenizer_folder(campaign),
                size=campaign.corpus.size,
                heldout_share=campaign.corpus.heldout_share,
                seed=campaign.corpus.seed,
                max_model_len=campaign.target.max_model_len,
            )
        except CorpusSkipped as exc:
            return event.caused(CorpusCompleted, producer=producer, corpus=None, manifest=None,
                                train_records=0, heldout_records=0, skipped_reason=str(exc))
        data = out.read_bytes()
        corpus_ref = bundle.write_bytes(run_id, layout.CORPUS, data)
        manifest_ref = bundle.write_bytes(run_id, layout.CORPUS_MANIFEST,
                                          out.with_name(out.name + ".manifest.json").read_bytes())
    for name, lines in split_files(data).items():
        bundle.write_bytes(run_id, layout.corpus_split(name), lines)
    return event.caused(
        CorpusCompleted, producer=producer, corpus=corpus_ref, manifest=manifest_ref,
        train_records=manifest.records.train, heldout_records=manifest.records.heldout,
    )


def routes(resources: Resources) -> list[Route]:
    bundle = resources.bundle

    async def handle(event: Event, ctx: StepContext) -> list[Event]:
        return [await asyncio.to_thread(run_corpus, bundle, event, f"{NAME}/{ctx.settings.instance}")]

    return [
        Route("profile.completed", handle, failure_step="corpus", outputs=DONE_BY),
        Route("corpus.requested", handle, step_key=lambda e: e.event_id, failure_step="corpus", outputs=DONE_BY),
    ]
