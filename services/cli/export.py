"""`specdec contracts export DIR` and the AsyncAPI document of the topology."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml
from faststream.specification import AsyncAPI
from pydantic import BaseModel

from contracts.campaign import Campaign
from contracts.catalogue import CATALOGUE, PROGRESS_PRODUCERS, deadletter_stream, stream_name
from contracts.deadletter import DeadLetter
from contracts.envelope import Event
from contracts.events import ALL_EVENTS
from contracts.progress import StepProgress
from services.runtime import apps
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.broker import make_broker
from services.runtime.delivery.service import bootstrap
from services.runtime.resources import Resources
from services.runtime.settings import RuntimeSettings


def event_schema(model: type[Event]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True)
    props = schema.get("properties", {})
    if getattr(model, "SCHEMA", ""):
        props["schema"]["const"] = model.SCHEMA
        props["version"]["const"] = model.VERSION
    return schema


def export(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    events: tuple[type[Event], ...] = (*ALL_EVENTS, StepProgress)
    for model in events:
        path = directory / f"{model.SCHEMA}.v{model.VERSION}.json"
        path.write_bytes(orjson.dumps(event_schema(model), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
        written.append(path)
    others: tuple[tuple[str, type[BaseModel]], ...] = (
        ("campaign.v1.json", Campaign), ("deadletter.v1.json", DeadLetter),
    )
    for name, other in others:
        path = directory / name
        path.write_bytes(orjson.dumps(other.model_json_schema(by_alias=True),
                                      option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
        written.append(path)
    return written


def asyncapi_document() -> str:
    """The AsyncAPI document of every built service (subscribers) and every
    catalogue stream's producer (publishers), generated from the faststream apps."""
    # Pinned, not read from SPECDEC_*: the committed document must not depend on
    # the environment of whoever regenerates it.
    settings = RuntimeSettings(
        instance="doc", redis_url="redis://redis:6379/0", redis_url_file="", stream_prefix="specdec"
    )
    broker = make_broker(settings)
    for name in apps.available():
        module = apps.load(name)
        resources = Resources(bundle=BundleStore(Path("bundles")))
        bootstrap(name, module.routes(resources), settings=settings, broker=broker, resources=resources, in_memory=True)
    for spec in CATALOGUE:
        stream = spec.stream(settings.stream_prefix)
        broker.publisher(stream=stream, title=f"{stream}:{spec.producer}", schema=spec.model,
                         description=(spec.model.__doc__ or "").strip())
    # Progress: one stream outside the catalogue, one publisher per producing step's owner (contracts/progress.py).
    progress = stream_name(settings.stream_prefix, StepProgress.SCHEMA)
    for producer in sorted(set(PROGRESS_PRODUCERS.values())):
        broker.publisher(stream=progress, title=f"{progress}:{producer}", schema=StepProgress,
                         description=(StepProgress.__doc__ or "").strip())
    broker.publisher(stream=deadletter_stream(settings.stream_prefix), title="specdec.deadletter:any",
                     schema=DeadLetter, description=(DeadLetter.__doc__ or "").strip())
    doc = AsyncAPI(broker, title="specdec", version="1", description="specdec event topology over Redis Streams")
    # faststream keeps subscribers in a WeakSet (id order): sort keys so the
    # committed document only changes when the topology does.
    return yaml.safe_dump(doc.to_specification().to_jsonable(), sort_keys=True, allow_unicode=True)
