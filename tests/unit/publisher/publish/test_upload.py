"""Publishing: dry run by default, file:// and HTTP targets, retries, recorded responses, hashes."""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import orjson
import pytest

from contracts.events import ReportRendered
from services.publisher.app import publish_event
from services.publisher.errors import PublishConflict, PublishFailed, PublishTargetError, ReportInputError
from services.publisher.pipeline import render_run
from services.publisher.publish.publish import parse_target, publish_run
from services.publisher.publish.transport import RetryPolicy
from services.runtime.bundle.bundle import BundleStore
from tests.support.http_server import LoopbackServer
from tests.unit.publisher.synthetic import RUN, Spec, build

FAST = RetryPolicy(attempts=4, backoff_s=0.01, max_backoff_s=0.05, timeout_s=5.0)


class Endpoint:
    """A loopback HTTP endpoint that answers POSTs with scripted statuses and records each request."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.requests: list[tuple[dict[str, str], bytes]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                endpoint.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = endpoint.statuses.pop(0) if endpoint.statuses else 200
                reply = orjson.dumps({"status": status, "received": len(body)})
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Receipt", f"r-{len(endpoint.requests)}")
                if status == 503:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.http = LoopbackServer(Handler, "/reports")
        self.url = self.http.url

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def endpoint() -> Iterator:
    made: list[Endpoint] = []

    def make(*statuses: int) -> Endpoint:
        made.append(Endpoint(list(statuses)))
        return made[-1]

    yield make
    for e in made:
        e.close()


def parts(headers: dict[str, str], body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """A multipart/form-data body as {filename or field name: (field name, bytes)}."""
    message = email.parser.BytesParser(policy=email.policy.default).parsebytes(
        b"Content-Type: " + headers["content-type"].encode() + b"\r\n\r\n" + body
    )
    out = {}
    for part in message.iter_parts():
        field = part.get_param("name", header="content-disposition")
        out[part.get_filename() or field] = (field, part.get_payload(decode=True))
    return out  # type: ignore[return-value]  # email types its parts loosely: names and bytes here


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def test_a_request_without_the_acknowledgement_is_a_dry_run_and_sends_nothing(clean, endpoint, tmp_path):
    bundle, rendered = clean
    server = endpoint(200)
    pub = await publish_run(bundle, RUN, target=server.url, key="dry-1", acknowledged_by=None, policy=FAST)
    assert pub.dry_run and "i_understand_this_publishes_externally" in pub.mode_reason
    assert server.requests == [] and pub.response is None
    assert {f.ref.uri for f in pub.files} == {r.uri for r in rendered.refs if not r.uri.endswith("report.json")}
    # Acknowledged but asked for a dry run: still nothing sent, nothing written at a file target.
    target = tmp_path / "out"
    pub = await publish_run(bundle, RUN, target=f"file://{target}", key="dry-2", acknowledged_by="cli",
                            force_dry_run=True)
    assert pub.dry_run and pub.written == [] and not target.exists()
    recorded = orjson.loads(bundle.read_bytes(RUN, "publish/dry-2/publication.json"))
    assert recorded["dry_run"] is True and recorded["destination"] == str(target / RUN)


async def test_a_file_target_in_the_bundle_gets_the_files_whose_hashes_the_event_carries(tmp_path):
    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    build(bundle, Spec(acknowledged=True, publish_target="file://published"))
    out = render_run(bundle, RUN)
    rendered = ReportRendered(run_id=RUN, producer="t", markdown=out.markdown, html=out.html, draft=out.summary.draft)
    event = await publish_event(bundle, rendered, producer="publisher/t")
    assert event.dry_run is False and event.target == "file://published" and event.causation_id == rendered.event_id
    folder = bundle.run_dir(RUN) / "published"
    for ref in event.sent:
        name = ref.uri.split("/report/", 1)[1]
        assert sha((folder / name).read_bytes()) == ref.sha256
    assert {ref.uri.rsplit("/", 1)[-1] for ref in event.sent} >= {"report.md", "report.html", "speedup.png"}
    manifest = orjson.loads((folder / "manifest.json").read_bytes())
    assert {f["name"]: f["sha256"] for f in manifest["files"]} == {
        ref.uri.split("/report/", 1)[1]: ref.sha256 for ref in event.sent
    }
    # The published copies are bundle artifacts too: hashed and write-once.
    assert bundle.ref(RUN, "published/report.html").sha256 == out.html.sha256


async def test_a_campaign_without_the_acknowledgement_publishes_a_dry_run(clean):
    bundle, out = clean  # its campaign targets file://published and does not acknowledge
    rendered = ReportRendered(run_id=RUN, producer="t", markdown=out.markdown, html=out.html, draft=False)
    event = await publish_event(bundle, rendered, producer="publisher/t")
    assert event.dry_run is True and event.target == "file://published"
    assert {ref.sha256 for ref in event.sent} == {r.sha256 for r in out.refs if not r.uri.endswith("report.json")}
    assert not (bundle.run_dir(RUN) / "published").exists()


async def test_an_absolute_folder_is_written_once_per_run(clean, tmp_path):
    bundle, _ = clean
    target = f"file://{tmp_path / 'site'}"
    pub = await publish_run(bundle, RUN, target=target, key="abs-1", acknowledged_by="cli")
    folder = tmp_path / "site" / RUN
    assert Path(pub.written[-1]).relative_to(folder).as_posix() == "manifest.json"  # written last
    for f in pub.files:
        assert sha((folder / f.name).read_bytes()) == f.ref.sha256
    again = await publish_run(bundle, RUN, target=target, key="abs-2", acknowledged_by="cli")
    assert again.written == pub.written  # same bytes: fine
    assert (folder / "report.md").stat().st_mode & 0o777 == 0o644
    (folder / "report.md").write_bytes(b"edited by hand\n")
    with pytest.raises(PublishConflict, match="never overwritten"):
        await publish_run(bundle, RUN, target=target, key="abs-3", acknowledged_by="cli")
    assert (folder / "report.md").read_bytes() == b"edited by hand\n"


async def test_http_retries_a_503_then_records_the_accepting_response(clean, endpoint):
    bundle, _ = clean
    server = endpoint(503, 200)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    pub = await publish_run(bundle, RUN, target=server.url, key="http-ok", acknowledged_by="policy",
                            policy=FAST, sleep=sleep)
    assert not pub.dry_run and len(server.requests) == 2 and waits == [0.0]  # Retry-After: 0
    record = orjson.loads(bundle.read_bytes(RUN, "publish/http-ok/response.json"))
    assert pub.response.sha256 == bundle.ref(RUN, "publish/http-ok/response.json").sha256
    assert [a["status"] for a in record["attempts"]] == [503, 200] and record["outcome"] == "accepted"
    assert record["attempts"][1]["headers"]["x-receipt"] == "r-2"
    assert orjson.loads(record["attempts"][1]["body"])["status"] == 200
    keys = {headers["idempotency-key"] for headers, _ in server.requests}
    assert keys == {f"{RUN}-http-ok"}
    headers, body = server.requests[-1]
    assert headers["x-specdec-run-id"] == RUN and headers["x-specdec-draft"] == "false"
    received = parts(headers, body)
    manifest = orjson.loads(received["manifest.json"][1])
    assert {f["name"]: f["sha256"] for f in manifest["files"]} == {f.name: f.ref.sha256 for f in pub.files}
    for f in pub.files:
        field, data = received[f.name]
        assert field == "file" and sha(data) == f.ref.sha256
    # A redelivery of the same request finds the record and sends nothing again.
    again = await publish_run(bundle, RUN, target=server.url, key="http-ok", acknowledged_by="policy", policy=FAST)
    assert again == pub and len(server.requests) == 2


async def test_http_refusal_is_final_and_recorded(clean, endpoint):
    bundle, _ = clean
    server = endpoint(400)
    with pytest.raises(PublishFailed, match="HTTP 400") as caught:
        await publish_run(bundle, RUN, target=server.url, key="http-400", acknowledged_by="policy", policy=FAST)
    assert len(server.requests) == 1
    record = orjson.loads(bundle.read_bytes(RUN, "publish/http-400/response.json"))
    assert record["outcome"] == "refused" and caught.value.recorded.uri.endswith("publish/http-400/response.json")


async def test_an_unreachable_endpoint_backs_off_exponentially_then_fails(clean):
    bundle, _ = clean
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    await publish_run(bundle, RUN, target=f"http://127.0.0.1:{port}/x", key="http-down-dry", acknowledged_by=None)
    with pytest.raises(PublishFailed, match="unreachable"):
        await publish_run(bundle, RUN, target=f"http://127.0.0.1:{port}/x", key="http-down", acknowledged_by="cli",
                          policy=FAST, sleep=sleep)
    assert waits == [0.01, 0.02, 0.04]
    record = orjson.loads(bundle.read_bytes(RUN, "publish/http-down/response.json"))
    assert len(record["attempts"]) == 4 and all(a["status"] is None and a["error"] for a in record["attempts"])


def test_targets_are_checked(tmp_path):
    assert parse_target("file://published").relpath == "published"
    assert parse_target("file:///srv/reports").directory == Path("/srv/reports")
    assert parse_target("https://reports.example/in").url == "https://reports.example/in"
    for bad in ("file://../outside", "file://.hidden", "ftp://host/x", "https://"):
        with pytest.raises(PublishTargetError):
            parse_target(bad)


async def test_publishing_an_unrendered_run_says_to_render_first(store):
    build(store, Spec())
    with pytest.raises(ReportInputError, match="specdec report"):
        await publish_run(store, RUN, target="file://published", key="k1", acknowledged_by="cli")
