"""Event contracts: strictness, descriptions, pinned schema/version, the registry
(round trip, upcasting, rejections), the stream catalogue and the schema export."""

from __future__ import annotations

import logging
import sys
import types
import typing
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest
import structlog
import yaml
from pydantic import BaseModel, Field, RootModel, ValidationError

from contracts.campaign import Campaign
from contracts.catalogue import BY_SCHEMA, CATALOGUE, CLI, SERVICES, STEP_OWNER, consumed_by, produced_by
from contracts.deadletter import DeadLetter
from contracts.envelope import Event
from contracts.events import ALL_EVENTS, FAILED, REQUESTED, STEPS
from contracts.inputs import STEP_INPUTS
from contracts.registry import InvalidEvent, Registry, UnknownEvent, default_registry

ROOT = Path(__file__).resolve().parents[3]
RUN = "toy-20260101-000000-abcdef"
SHA = "ab" * 32


def ref(path: str = "x/y.json") -> dict[str, Any]:
    return {"uri": f"bundle://{RUN}/{path}", "sha256": SHA, "size_bytes": 12}


def example_campaign() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())


# One valid payload per event (envelope fields are added by `sample`). A new
# event without an entry here fails `test_every_event_has_a_sample`.
PAYLOADS: dict[str, dict[str, Any]] = {
    "campaign.submitted": {"campaign": example_campaign(), "campaign_ref": ref("campaign.json")},
    "run.approved": {"i_understand_this_mutates_cluster": True, "plan_sha256s": [SHA], "approved_by": "op@host"},
    # Each request with every input its step reads (contracts/inputs.py); any other name is refused.
    **{f"{step}.requested": {"requested_by": "op@host", "inputs": {name: ref() for name in STEP_INPUTS[step]}}
       for step in STEPS},
    **{f"{step}.failed": {"step": step, "reason": "it broke", "error_type": "Boom"} for step in STEPS},
    "profile.completed": {
        "profile": ref(), "source": "traffic", "records_accepted": 3, "records_rejected": 1,
        "recommended_method": "ngram",
    },
    "corpus.completed": {"corpus": ref(), "manifest": ref("m.json"), "train_records": 9, "heldout_records": 1},
    "capacity.selected": {"scheduler": "local", "node": "n1", "snapshot": ref()},
    "capacity.unavailable": {"scheduler": "slurm", "reasons": ["busy"], "snapshot": ref()},
    "training.planned": {"plan": ref("training/plan.json"), "executor": "local", "node": "n1"},
    "training.started": {"plan_sha256": SHA, "executor": "local", "handle": "1234"},
    "training.completed": {"output": ref(), "checkpoint_dir": "/ckpt", "duration_s": 1.5},
    "bench.planned": {"plan": ref(), "cells": ["standing", "ngram-k3"], "trials": 3},
    "bench.trial.completed": {
        "cell_id": "ngram-k3", "trial": 0, "concurrency": 4, "result": ref(), "completed_requests": 10,
        "failed_requests": 0, "median_ttft_ms": 3.0, "median_tpot_ms": 1.0,
        "spec_decode": {
            "num_drafts": 10, "num_draft_tokens": 30, "num_accepted_tokens": 12, "accepted_per_position": [6, 4, 2],
            "acceptance_rate": 0.4, "mean_acceptance_length": 2.2,
        },
    },
    "bench.completed": {"results": [ref()], "failed_cells": {"draft-k3": "oom"}, "draft": False},
    "gate.decided": {"decision": "promote", "winner": "ngram-k3", "decision_ref": ref(), "reasons": ["faster"]},
    "report.rendered": {"markdown": ref("r.md"), "html": ref("r.html"), "draft": True},
    "report.published": {"target": "file://published", "dry_run": True, "sent": [ref()]},
}


def sample(model: type[Event], **override: Any) -> Event:
    return model(run_id=RUN, producer="test/1", **{**PAYLOADS[model.SCHEMA], **override})


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """Every pydantic model class named anywhere inside a type annotation."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found = []
    for arg in typing.get_args(annotation):
        found.extend(_models_in(arg))
    return found


def nested_models(root: type[BaseModel]) -> set[type[BaseModel]]:
    """`root` and every model reachable through its fields, recursively."""
    seen: set[type[BaseModel]] = set()
    todo = [root]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        if issubclass(model, RootModel):
            continue
        for field in model.model_fields.values():
            todo.extend(_models_in(field.annotation))
    return seen


ROOTS: tuple[type[BaseModel], ...] = (*ALL_EVENTS, Campaign, DeadLetter)
ALL_MODELS = sorted({m for root in ROOTS for m in nested_models(root)}, key=lambda m: m.__qualname__)
STRUCT_MODELS = [m for m in ALL_MODELS if not issubclass(m, RootModel)]


def test_the_model_walk_reaches_nested_campaign_models():
    names = {m.__name__ for m in nested_models(Campaign)}
    # Reached only through unions, lists and optionals: proves the walk recurses.
    assert {"Cell", "ServingConfig", "SpeculativeConfig", "TrafficShapes", "MatrixFile", "ArgvTemplate"} <= names
    assert {"ArtifactRef", "SpecDecodeDelta", "Campaign"} <= {m.__name__ for m in ALL_MODELS}


@pytest.mark.parametrize("model", STRUCT_MODELS, ids=lambda m: m.__name__)
def test_every_model_rejects_an_unknown_field(model: type[BaseModel]):
    with pytest.raises(ValidationError) as err:
        model.model_validate({"surely_not_a_field": 1})
    assert any(e["type"] == "extra_forbidden" and e["loc"] == ("surely_not_a_field",) for e in err.value.errors())


@pytest.mark.parametrize("model", STRUCT_MODELS, ids=lambda m: m.__name__)
def test_every_field_has_a_description(model: type[BaseModel]):
    undocumented = [name for name, field in model.model_fields.items() if not (field.description or "").strip()]
    assert undocumented == [], f"{model.__name__} fields without a description: {undocumented}"


def test_every_event_has_a_sample():
    assert sorted(PAYLOADS) == sorted(m.SCHEMA for m in ALL_EVENTS)


@pytest.mark.parametrize("model", ALL_EVENTS, ids=lambda m: m.SCHEMA)
def test_json_round_trip_through_the_registry(model: type[Event]):
    event = sample(model)
    raw = event.to_json()
    assert orjson.loads(raw)["schema"] == model.SCHEMA and orjson.loads(raw)["version"] == model.VERSION
    parsed = default_registry().parse(raw)
    assert type(parsed) is model
    assert parsed == event
    assert parsed.to_json() == raw


@pytest.mark.parametrize("model", ALL_EVENTS, ids=lambda m: m.SCHEMA)
def test_schema_and_version_are_pinned(model: type[Event]):
    assert sample(model).schema_ == model.SCHEMA
    other = "profile.completed" if model.SCHEMA != "profile.completed" else "corpus.completed"
    with pytest.raises(ValidationError, match="not " + other.replace(".", r"\.")):
        sample(model, schema=other)
    with pytest.raises(ValidationError, match=f"not {model.SCHEMA} v{model.VERSION + 1}"):
        sample(model, version=model.VERSION + 1)


def test_an_extra_field_in_a_payload_is_invalid():
    data = orjson.loads(sample(REQUESTED["profile"]).to_json())
    data["surprise"] = 1
    with pytest.raises(InvalidEvent, match="surprise"):
        default_registry().parse(orjson.dumps(data))


# --- upcasting ----------------------------------------------------------------------


class ProbeV2(Event):
    """A test event at version 2: v1 had `name`, v2 calls it `label` and adds `count`."""

    SCHEMA = "probe.thing"
    VERSION = 2
    label: str = Field(description="Renamed from v1's name.")
    count: int = Field(description="New in v2.")


def v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    data["label"] = data.pop("name")
    data["count"] = 0
    return data


def probe_v1(**extra: Any) -> dict[str, Any]:
    return {"schema": "probe.thing", "version": 1, "run_id": RUN, "producer": "old/1", "name": "hello", **extra}


def test_a_v1_payload_is_upcast_to_v2():
    registry = Registry([ProbeV2])
    registry.register_upcaster("probe.thing", 1, v1_to_v2)
    event = registry.parse(orjson.dumps(probe_v1()))
    assert isinstance(event, ProbeV2)
    assert (event.version, event.label, event.count) == (2, "hello", 0)
    # A current payload is read as is.
    assert registry.parse(event.to_json()) == event


def test_without_an_upcaster_an_old_version_is_unknown():
    registry = Registry([ProbeV2])
    with pytest.raises(UnknownEvent, match="no upcaster"):
        registry.parse(orjson.dumps(probe_v1()))


def test_an_upcast_payload_is_still_validated():
    registry = Registry([ProbeV2])
    registry.register_upcaster("probe.thing", 1, v1_to_v2)
    with pytest.raises(InvalidEvent, match="producer"):
        registry.parse(orjson.dumps({k: v for k, v in probe_v1().items() if k != "producer"}))


@pytest.mark.parametrize("version", [0, 3, 99])
def test_an_unknown_version_is_rejected(version: int):
    registry = Registry([ProbeV2])
    registry.register_upcaster("probe.thing", 1, v1_to_v2)
    with pytest.raises(UnknownEvent, match=f"v{version}"):
        registry.parse(orjson.dumps(probe_v1(version=version)))


def test_an_unknown_version_of_a_real_event_is_rejected():
    data = orjson.loads(sample(REQUESTED["bench"]).to_json())
    data["version"] = 2
    with pytest.raises(UnknownEvent, match="bench.requested v2"):
        default_registry().parse(orjson.dumps(data))


def test_an_unknown_schema_is_rejected():
    data = orjson.loads(sample(REQUESTED["bench"]).to_json())
    data["schema"] = "bench.exploded"
    with pytest.raises(UnknownEvent, match="bench.exploded"):
        default_registry().parse(orjson.dumps(data))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "JSON list"),
        (b'"text"', "JSON str"),
        (b'{"version": 1}', "string `schema`"),
        (b'{"schema": "profile.requested", "version": "1"}', "integer `version`"),
        (b'{"schema": "profile.requested", "version": true}', "integer `version`"),
    ],
)
def test_malformed_payloads_are_invalid(raw: bytes, message: str):
    with pytest.raises(InvalidEvent, match=message):
        default_registry().parse(raw)


def test_an_invalid_field_is_invalid_and_named():
    data = orjson.loads(sample(FAILED["gate"]).to_json())
    data["reason"] = ""
    with pytest.raises(InvalidEvent, match="reason"):
        default_registry().parse(orjson.dumps(data))


def test_registering_a_schema_twice_is_refused():
    with pytest.raises(ValueError, match="twice"):
        Registry([ProbeV2, ProbeV2])


# --- the catalogue ------------------------------------------------------------------


def test_the_catalogue_covers_every_event_exactly_once():
    counts = Counter(spec.model for spec in CATALOGUE)
    assert set(counts) == set(ALL_EVENTS)
    assert [m.SCHEMA for m, n in counts.items() if n != 1] == []
    assert len(BY_SCHEMA) == len(CATALOGUE)
    assert sorted(default_registry().schemas) == sorted(BY_SCHEMA)


def test_every_producer_and_consumer_is_a_known_service():
    known = set(SERVICES) | {CLI}
    for spec in CATALOGUE:
        assert spec.producer in known, spec.schema
        assert set(spec.consumers) <= known, spec.schema


def test_every_step_has_its_requested_and_failed_streams_owned_by_one_service():
    assert set(STEP_OWNER) == set(STEPS)
    for step in STEPS:
        owner = STEP_OWNER[step]
        requested, failed = BY_SCHEMA[f"{step}.requested"], BY_SCHEMA[f"{step}.failed"]
        assert requested.model is REQUESTED[step] and failed.model is FAILED[step]
        assert owner in requested.consumers
        assert failed.producer == owner
        assert requested in consumed_by(owner) and failed in produced_by(owner)


def test_the_journal_reads_every_stream():
    assert consumed_by("journal") == list(CATALOGUE)


# --- `specdec contracts export DIR` -----------------------------------------------


@pytest.fixture
def restore_logging():
    # main() points structlog and logging at this test's captured stderr; put
    # them back so later tests do not log into a closed capture buffer.
    yield
    structlog.reset_defaults()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, force=True)


def test_contracts_export_writes_one_schema_per_event_and_the_campaign_and_deadletter(
    tmp_path, capsys, restore_logging
):
    from services.cli.main import main

    out = tmp_path / "schemas"
    assert main(["contracts", "export", str(out)]) == 0
    expected = {f"{m.SCHEMA}.v{m.VERSION}.json" for m in ALL_EVENTS} | {"campaign.v1.json", "deadletter.v1.json",
                                                                          "step.progress.v1.json"}
    assert {p.name for p in out.iterdir()} == expected
    printed = {Path(line).name for line in capsys.readouterr().out.split()}
    assert printed == expected
    for model in ALL_EVENTS:
        schema = orjson.loads((out / f"{model.SCHEMA}.v{model.VERSION}.json").read_bytes())
        assert schema["properties"]["schema"]["const"] == model.SCHEMA
        assert schema["properties"]["version"]["const"] == model.VERSION
        # The schema accepts a real event and refuses one of another version.
        instance = orjson.loads(sample(model).to_json())
        jsonschema.validate(instance, schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**instance, "version": model.VERSION + 1}, schema)
    deadletter = orjson.loads((out / "deadletter.v1.json").read_bytes())
    assert deadletter["properties"]["schema"]["const"] == "deadletter"
    assert deadletter["properties"]["version"]["const"] == 1
    campaign = orjson.loads((out / "campaign.v1.json").read_bytes())
    assert campaign["properties"]["version"]["const"] == 1
    jsonschema.validate(example_campaign(), campaign)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**example_campaign(), "surprise": 1}, campaign)


def test_sample_union_type_helpers_are_sane():
    # Guard the helper itself: X | None and list[X] both yield X.
    assert _models_in(Campaign | None) == [Campaign]
    assert _models_in(list[Campaign]) == [Campaign]
    assert _models_in(types.NoneType) == []


def test_campaign_and_deadletter_versions_are_pinned():
    with pytest.raises(ValidationError, match="version"):
        Campaign.model_validate({**example_campaign(), "version": 2})
    record = {"kind": "invalid", "reason": "r", "service": "s", "consumer": "c", "stream": "x", "message_id": "1-0",
              "delivery_count": 1, "payload": "{}"}
    assert DeadLetter.model_validate(record).schema_ == "deadletter"
    with pytest.raises(ValidationError):
        DeadLetter.model_validate({**record, "schema": "profile.failed"})
    with pytest.raises(ValidationError):
        DeadLetter.model_validate({**record, "version": 2})
