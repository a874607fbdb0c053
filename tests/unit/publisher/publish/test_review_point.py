"""The review point of a publish: an external target gets only what a dry run of the same report showed,
with the acknowledgement on the live call, and a DRAFT only on an explicit, recorded override."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import orjson
import pytest

from services.publisher.errors import PublishRefused
from services.publisher.publish.outbox import DraftOverride, outbox
from services.publisher.publish.publish import publish_report, publish_run
from services.publisher.publish.publish_review import dry_run_path, live_external
from services.publisher.publish.transport import RetryPolicy
from services.runtime.settings import RuntimeSettings
from tests.support.http_server import LoopbackServer
from tests.unit.publisher.synthetic import RUN

FAST = RetryPolicy(attempts=2, backoff_s=0.01, max_backoff_s=0.02, timeout_s=5.0)
SETTINGS = RuntimeSettings(instance="t")


class Receiver:
    """A loopback endpoint that accepts every POST and keeps its body."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                receiver.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.http = LoopbackServer(Handler, "/lake")
        self.url = self.http.url

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def _manifest(body: bytes) -> dict:
    """The manifest part of a multipart body (its boundary is the body's first line)."""
    boundary = body.split(b"\r\n", 1)[0]
    for part in body.split(boundary):
        head, _, data = part.partition(b"\r\n\r\n")
        if b'name="manifest"' in head:
            return orjson.loads(data.removesuffix(b"\r\n"))
    raise AssertionError("no manifest part")


async def _publish(bundle, target, *, ack=None, override=None, dry_run=False):
    return await publish_report(bundle, RUN, target, acknowledged_by=ack, draft_override=override, settings=SETTINGS,
                                dry_run=dry_run, policy=FAST)


async def test_a_live_external_publish_needs_a_dry_run_of_the_same_report_to_the_same_target(clean, receiver):
    bundle, _ = clean
    url = receiver.url + "/a"
    with pytest.raises(PublishRefused, match="no dry run of this exact report"):
        await _publish(bundle, url, ack="cli")
    assert receiver.bodies == []
    # A dry run to another destination does not count for this one.
    await _publish(bundle, receiver.url + "/b")
    with pytest.raises(PublishRefused, match="no dry run"):
        await _publish(bundle, url, ack="mcp")
    dry = await _publish(bundle, url)
    assert dry.dry_run and receiver.bodies == []
    record = orjson.loads(bundle.read_bytes(RUN, dry_run_path(url, dry.manifest_sha256)))
    assert record["manifest_sha256"] == dry.manifest_sha256 and record["destination"] == url
    assert {f["name"] for f in record["files"]} == {f.name for f in (*dry.files, *dry.evidence)}
    # An acknowledged call that asks for a dry run is one too: nothing is sent.
    assert (await _publish(bundle, url, ack="cli", dry_run=True)).dry_run and receiver.bodies == []
    live = await _publish(bundle, url, ack="cli")
    assert not live.dry_run and live.acknowledged_by == "cli" and len(receiver.bodies) == 1
    assert live.dry_run_record == dry_run_path(url, dry.manifest_sha256) and "after the dry run" in live.mode_reason
    assert live.manifest_sha256 == dry.manifest_sha256
    assert orjson.loads(bundle.read_bytes(RUN, f"publish/{live.key}/publication.json"))["external"] is True


async def test_a_draft_goes_out_only_on_an_override_that_its_dry_run_showed_too(drafted, receiver):
    bundle, _ = drafted
    url = receiver.url
    plain = await _publish(bundle, url)
    assert plain.draft and "explicit override" in plain.mode_reason
    with pytest.raises(PublishRefused, match="the report is a DRAFT"):
        await _publish(bundle, url, ack="cli")
    override = DraftOverride(reason="  shared early with the serving team, marked DRAFT  ")
    assert override.reason == "shared early with the serving team, marked DRAFT"
    # The override is part of the manifest: the dry run without it does not cover a live publish with it.
    with pytest.raises(PublishRefused, match="no dry run") as refused:
        await _publish(bundle, url, ack="cli", override=override)
    assert "the report is a DRAFT" not in str(refused.value)  # the override answers that part
    assert receiver.bodies == []
    dry = await _publish(bundle, url, override=override)
    assert dry.manifest_sha256 != plain.manifest_sha256 and override.reason in dry.mode_reason
    live = await _publish(bundle, url, ack="cli", override=override)
    assert not live.dry_run and live.draft and live.draft_override == override and len(receiver.bodies) == 1
    assert override.reason in live.mode_reason
    assert _manifest(receiver.bodies[0])["draft_override"] == {"reason": override.reason}
    recorded = orjson.loads(bundle.read_bytes(RUN, f"publish/{live.key}/publication.json"))
    assert recorded["draft_override"] == {"reason": override.reason}
    with pytest.raises(ValueError, match="reason in words"):
        DraftOverride(reason="   ")


async def test_an_override_on_a_final_report_is_refused(clean, receiver):
    bundle, _ = clean
    with pytest.raises(PublishRefused, match="is final, not a DRAFT"):
        await _publish(bundle, receiver.url, override=DraftOverride(reason="not needed"))


async def test_the_campaign_policy_dry_runs_first_and_never_sends_a_draft(clean, drafted, receiver):
    bundle, _ = clean
    pub = await publish_run(bundle, RUN, target=receiver.url + "/svc", key="svc-1", acknowledged_by="policy",
                            settings=SETTINGS, policy=FAST)
    assert not pub.dry_run and len(receiver.bodies) == 1 and pub.acknowledged_by == "policy"
    assert pub.dry_run_record == dry_run_path(receiver.url + "/svc", pub.manifest_sha256)
    assert bundle.ref(RUN, pub.dry_run_record).size_bytes > 0
    draft_bundle, _ = drafted
    pub = await publish_run(draft_bundle, RUN, target=receiver.url + "/svc", key="svc-2", acknowledged_by="policy",
                            settings=SETTINGS, policy=FAST)
    assert pub.dry_run and pub.acknowledged_by is None and "never sends a DRAFT" in pub.mode_reason
    assert len(receiver.bodies) == 1 and draft_bundle.ref(RUN, pub.dry_run_record)  # the dry run is recorded


async def test_the_campaign_acknowledgement_alone_records_a_dry_run_a_person_then_publishes(clean, receiver):
    bundle, _ = clean
    sent = len(receiver.bodies)
    pub = await publish_run(bundle, RUN, target=receiver.url + "/svc", key="svc-alone", acknowledged_by="campaign",
                            settings=SETTINGS, policy=FAST)
    assert pub.dry_run and pub.acknowledged_by is None and len(receiver.bodies) == sent
    assert "alone publishes nothing live" in pub.mode_reason and "review.pre_approve" in pub.mode_reason
    assert bundle.ref(RUN, pub.dry_run_record).size_bytes > 0
    # That dry run is the review a person's acknowledged call needs: the same report goes live.
    live = await publish_report(bundle, RUN, receiver.url + "/svc", acknowledged_by="cli", settings=SETTINGS,
                                policy=FAST)
    assert not live.dry_run and live.dry_run_record == pub.dry_run_record and len(receiver.bodies) == sent + 1


async def test_a_folder_is_not_external_and_needs_no_dry_run(drafted, tmp_path):
    bundle, _ = drafted
    pub = await publish_report(bundle, RUN, f"file://{tmp_path / 'site'}", acknowledged_by="cli", settings=SETTINGS)
    assert not pub.dry_run and not pub.external and pub.dry_run_record is None and pub.draft
    assert (tmp_path / "site" / RUN / "manifest.json").is_file()


async def test_a_token_is_never_sent_over_plain_http(clean, receiver, monkeypatch):
    bundle, _ = clean
    monkeypatch.setenv("LAKE_TOKEN", "s3cr3t-t0ken")
    settings = RuntimeSettings(instance="t", publish_token_env="LAKE_TOKEN")
    with pytest.raises(PublishRefused, match="never sent unencrypted") as refused:
        await publish_report(bundle, RUN, receiver.url, acknowledged_by=None, settings=settings)
    assert "s3cr3t" not in str(refused.value) and receiver.bodies == []


def test_a_person_refused_hears_every_reason_at_once():
    with pytest.raises(PublishRefused) as refused:
        live_external(RUN, "s3://lake/r/", acknowledged_by="cli", draft=True, override=None, reviewed=None)
    assert "no dry run" in str(refused.value) and "the report is a DRAFT" in str(refused.value)
    live, why = live_external(RUN, "s3://lake/r/", acknowledged_by="mcp", draft=False, override=None, reviewed="p.json")
    assert live and "given by the mcp" in why


def test_the_same_report_gives_the_same_manifest_with_its_evidence(clean):
    bundle, _ = clean
    first, again = outbox(bundle, RUN), outbox(bundle, RUN)
    assert first.manifest == again.manifest and first.manifest_sha256 == again.manifest_sha256
    manifest = orjson.loads(first.manifest)
    names = [e["name"] for e in manifest["evidence"]]
    assert names == sorted(names) and "evidence/gate/DECISION.json" in names and "evidence/report/report.json" in names
    results = [n for n in names if n.startswith("evidence/bench/") and "/result-c" in n]
    assert len(results) == 2 * 2 * 3  # two cells x two levels x 3 trials
    for entry in manifest["evidence"]:
        assert bundle.ref(RUN, entry["name"].removeprefix("evidence/")).sha256 == entry["sha256"]
    assert [name for name, _, _ in first.objects()][-1] == "manifest.json"
    assert b"produced_at" not in first.manifest and manifest["draft_override"] is None


async def test_a_call_cannot_borrow_the_campaign_acknowledgement(clean, receiver):
    bundle, _ = clean
    with pytest.raises(PublishRefused, match="'cli' or 'mcp'"):
        await publish_report(bundle, RUN, receiver.url, acknowledged_by="campaign", settings=SETTINGS)
    assert receiver.bodies == []


def test_a_read_token_never_shows_itself(tmp_path):
    from services.publisher.publish.credentials import read_token, token_source

    (tmp_path / "token").write_text("abc.DEF-123\n")
    token = read_token(token_source(RuntimeSettings(instance="t", publish_token_file=str(tmp_path / "token"))))
    assert token.header() == "Bearer abc.DEF-123"
    assert "abc.DEF" not in repr(token) and "abc.DEF" not in str(token) and str(tmp_path / "token") in repr(token)
    with pytest.raises(ValueError, match="both set"):
        RuntimeSettings(instance="t", publish_token_env="A", publish_token_file="/x")
