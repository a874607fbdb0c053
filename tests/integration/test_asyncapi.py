"""The committed AsyncAPI document (docs/asyncapi.yaml) matches the code.

It is generated from the faststream apps (every built service's subscribers)
and the stream catalogue (every stream's publisher); `make asyncapi`
regenerates it.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import yaml

from contracts.catalogue import CATALOGUE, consumed_by
from services.cli.export import asyncapi_document
from services.runtime import apps

COMMITTED = Path(__file__).resolve().parents[2] / "docs/asyncapi.yaml"


@pytest.fixture(scope="module")
def document() -> str:
    return asyncapi_document()


def test_generation_is_deterministic(document):
    assert asyncapi_document() == document


def test_generation_ignores_the_environment(document, monkeypatch):
    monkeypatch.setenv("SPECDEC_STREAM_PREFIX", "elsewhere")
    monkeypatch.setenv("SPECDEC_RECLAIM_IDLE_MS", "4321")
    assert asyncapi_document() == document


def test_the_committed_document_matches_the_code(document):
    assert COMMITTED.exists(), "docs/asyncapi.yaml is missing: run `make asyncapi`"
    committed = COMMITTED.read_text()
    if committed != document:
        diff = "".join(
            list(difflib.unified_diff(committed.splitlines(True), document.splitlines(True), "committed", "code"))[:60]
        )
        pytest.fail(f"docs/asyncapi.yaml has drifted from the code: run `make asyncapi` and commit it\n{diff}")


def test_the_document_describes_every_stream_and_subscriber(document):
    doc = yaml.safe_load(document)
    channels = doc["channels"]
    schemas = doc["components"]["schemas"]
    messages = doc["components"]["messages"]
    for spec in CATALOGUE:
        key = f"specdec.{spec.schema}:{spec.producer}"
        assert channels[key]["address"] == f"specdec.{spec.schema}"
        assert channels[key]["bindings"]["redis"]["method"] == "xadd"
        [ref] = channels[key]["messages"].values()
        message = messages[ref["$ref"].rsplit("/", 1)[1]]
        assert message["payload"]["$ref"] == f"#/components/schemas/{spec.model.__name__}"
        assert set(spec.model.model_fields) - {"schema_"} < set(schemas[spec.model.__name__]["properties"])
    assert channels["specdec.deadletter:any"]["address"] == "specdec.deadletter"
    built = apps.available()
    assert "journal" in built
    for service in built:
        for spec in consumed_by(service):
            for role in ("read", "reclaim"):
                binding = channels[f"specdec.{spec.schema}:{service}:{role}"]["bindings"]["redis"]
                assert (binding["groupName"], binding["method"]) == (service, "xreadgroup")
