"""Publishing to an HTTPS lake endpoint with a bearer token: a real TLS server on loopback whose
certificate a private CA (made here) signs; the client trusts it through SPECDEC_PUBLISH_CA_BUNDLE.

The endpoint accepts only the right token; the token comes from the variable
SPECDEC_PUBLISH_TOKEN_ENV names or the file SPECDEC_PUBLISH_TOKEN_FILE names,
and appears in no log line, no message and no file of the bundle. It goes only
where the operator's settings allow (SPECDEC_PUBLISH_ALLOWED_TARGETS, else the
campaign's reviewed publish.target): a target the caller names outside that is
refused before the listener sees a connection.
"""

from __future__ import annotations

import datetime as dt
import email.parser
import email.policy
import hashlib
import ipaddress
import logging
import ssl
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import cast

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from contracts.campaign import Campaign
from contracts.events import ReportRendered
from services.publisher.app import publish_for
from services.publisher.errors import PublishCredentialsError, PublishFailed, PublishRefused
from services.publisher.pipeline import render_run
from services.publisher.publish.publish import publish_report
from services.publisher.publish.transport import RetryPolicy
from services.runtime.bundle.bundle import BundleStore
from services.runtime.settings import RuntimeSettings
from tests.support.http_server import LoopbackServer
from tests.unit.publisher.synthetic import RUN, Spec, build, campaign

TOKEN = "lake-T0ken.for-this_test~only"
FAST = RetryPolicy(attempts=2, backoff_s=0.01, max_backoff_s=0.02, timeout_s=5.0)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_tls(folder: Path) -> tuple[Path, Path, Path]:
    """A private CA and a server certificate for 127.0.0.1 it signs: (ca.pem, server.pem, server-key.pem)."""
    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (x509.CertificateBuilder().subject_name(_name("specdec test CA")).issuer_name(_name("specdec test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(ca_ski, critical=False)
          .sign(ca_key, hashes.SHA256()))
    server = (x509.CertificateBuilder().subject_name(_name("127.0.0.1")).issuer_name(ca.subject)
              .public_key(key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
              .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                          x509.DNSName("localhost")]), critical=False)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
              .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
              .sign(ca_key, hashes.SHA256()))
    paths = folder / "ca.pem", folder / "server.pem", folder / "server-key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


class Lake:
    """An HTTPS endpoint that takes a report only with `Authorization: Bearer TOKEN` (401 otherwise)."""

    def __init__(self, folder: Path) -> None:
        self.ca, cert, key = make_tls(folder)
        self.requests: list[tuple[int, dict[str, str], bytes]] = []
        lake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = 200 if self.headers.get("Authorization") == f"Bearer {TOKEN}" else 401
                lake.requests.append((status, {k.lower(): v for k, v in self.headers.items()}, body))
                reply = b'{"stored": true}' if status == 200 else b'{"error": "missing or wrong bearer token"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.http = LoopbackServer(Handler, "/lake/reports", tls=context)
        self.url = self.http.url

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[Lake]:
    server = Lake(tmp_path)
    yield server
    server.close()


@pytest.fixture
def bundle(tmp_path: Path) -> BundleStore:
    store = BundleStore(tmp_path / "bundles", fsync=False)
    build(store, Spec())
    render_run(store, RUN)
    return store


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "secrets" / "lake-token"
    path.parent.mkdir()
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


def parts(headers: dict[str, str], body: bytes) -> dict[str | None, bytes]:
    message = email.parser.BytesParser(policy=email.policy.default).parsebytes(
        b"Content-Type: " + headers["content-type"].encode() + b"\r\n\r\n" + body
    )
    # A leaf part's payload, decoded, is its bytes.
    return {p.get_filename(): cast(bytes, p.get_payload(decode=True)) for p in message.iter_parts()}


def token_nowhere(bundle: BundleStore, *texts: str) -> None:
    for text in texts:
        assert TOKEN not in text
    for path in bundle.run_dir(RUN).rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), f"the token is in {path}"


async def _live(bundle: BundleStore, url: str, settings: RuntimeSettings, policy: RetryPolicy = FAST):
    await publish_report(bundle, RUN, url, acknowledged_by=None, settings=settings, policy=policy)
    return await publish_report(bundle, RUN, url, acknowledged_by="cli", settings=settings, policy=policy)


async def test_the_token_from_a_file_is_accepted_and_is_in_no_log_and_no_bundle_file(
    bundle, lake, token_file, caplog, *, capfd
):
    caplog.set_level(logging.DEBUG)  # httpx and httpcore at their most talkative
    settings = RuntimeSettings(instance="t", publish_token_file=str(token_file), publish_ca_bundle=str(lake.ca),
                               publish_allowed_targets=lake.url)
    pub = await _live(bundle, lake.url, settings)
    assert not pub.dry_run and [status for status, _, _ in lake.requests] == [200]
    _, headers, body = lake.requests[0]
    received = parts(headers, body)
    manifest = orjson.loads(received["manifest.json"])
    assert hashlib.sha256(received["manifest.json"]).hexdigest() == pub.manifest_sha256
    listed = [*manifest["files"], *manifest["evidence"]]
    assert set(received) == {e["name"] for e in listed} | {"manifest.json"}
    for entry in listed:
        assert hashlib.sha256(received[entry["name"]]).hexdigest() == entry["sha256"]
    assert "evidence/gate/DECISION.json" in received and headers["idempotency-key"] == f"{RUN}-{pub.key}"
    record = orjson.loads(bundle.read_bytes(RUN, f"publish/{pub.key}/response.json"))
    assert record["outcome"] == "accepted" and "authorization" not in str(record).lower()
    out, err = capfd.readouterr()
    assert "POST" in caplog.text  # httpx did log the request: without the header
    token_nowhere(bundle, caplog.text, out, err, repr(pub))


async def test_a_wrong_token_is_refused_by_the_endpoint_and_never_recorded(bundle, lake, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("LAKE_PUBLISH_TOKEN", "not-the-token")
    settings = RuntimeSettings(instance="t", publish_token_env="LAKE_PUBLISH_TOKEN", publish_ca_bundle=str(lake.ca),
                               publish_allowed_targets=lake.url)
    with pytest.raises(PublishFailed, match="HTTP 401.*refused the credentials") as caught:
        await _live(bundle, lake.url, settings)
    assert [status for status, _, _ in lake.requests] == [401]  # final: not retried
    assert lake.requests[0][1]["authorization"] == "Bearer not-the-token"
    assert "not-the-token" not in str(caught.value) and "not-the-token" not in caplog.text
    for path in bundle.run_dir(RUN).rglob("*"):
        if path.is_file():
            assert b"not-the-token" not in path.read_bytes()


async def test_a_missing_token_stops_the_publish_before_any_request(bundle, lake, tmp_path, monkeypatch):
    gone = RuntimeSettings(instance="t", publish_token_file=str(tmp_path / "nothing-here"),
                           publish_ca_bundle=str(lake.ca), publish_allowed_targets=lake.url)
    with pytest.raises(PublishCredentialsError, match="cannot be read.*SPECDEC_PUBLISH_TOKEN_FILE"):
        await _live(bundle, lake.url, gone)
    monkeypatch.delenv("LAKE_PUBLISH_TOKEN", raising=False)
    unset = gone.model_copy(update={"publish_token_file": "", "publish_token_env": "LAKE_PUBLISH_TOKEN"})
    with pytest.raises(PublishCredentialsError, match="LAKE_PUBLISH_TOKEN .*is unset or empty"):
        await _live(bundle, lake.url, unset)
    (tmp_path / "two-tokens").write_text("one two\n")
    spaced = gone.model_copy(update={"publish_token_file": str(tmp_path / "two-tokens")})
    with pytest.raises(PublishCredentialsError, match="characters a bearer token cannot") as caught:
        await _live(bundle, lake.url, spaced)
    assert "one two" not in str(caught.value) and lake.requests == []


async def test_without_the_ca_bundle_the_private_certificate_is_not_trusted(bundle, lake, token_file):
    settings = RuntimeSettings(instance="t", publish_token_file=str(token_file), publish_allowed_targets=lake.url)
    with pytest.raises(PublishFailed, match="CERTIFICATE_VERIFY_FAILED"):
        await _live(bundle, lake.url, settings, policy=RetryPolicy(attempts=1, timeout_s=5.0))
    assert lake.requests == []  # the handshake failed: no request, so no token, ever reached it


async def test_the_service_publishes_live_from_its_own_dry_run_when_the_campaign_pre_approves(
    lake, token_file, tmp_path
):
    # No allow-list: the token goes to the campaign's own publish.target, as the run's bundle records it.
    settings = RuntimeSettings(instance="t", publish_token_file=str(token_file), publish_ca_bundle=str(lake.ca))
    spec = Spec(publish_target=lake.url, acknowledged=True)
    bundle = BundleStore(tmp_path / "service-bundles", fsync=False)
    build(bundle, spec)
    out = render_run(bundle, RUN)
    acknowledged = campaign(spec)
    # The acknowledgement alone: the service records its dry run and sends nothing (issue 29).
    alone = ReportRendered(run_id=RUN, producer="t", markdown=out.markdown, html=out.html, draft=False)
    published = await publish_for(bundle, alone, acknowledged, producer="publisher/t", settings=settings)
    assert published.dry_run is True and lake.requests == []
    # With review.pre_approve listing publish: live, from that same dry run.
    data = acknowledged.model_dump(by_alias=True)
    data["review"] = {"pre_approve": ["publish"]}
    event = ReportRendered(run_id=RUN, producer="t", markdown=out.markdown, html=out.html, draft=False)
    published = await publish_for(bundle, event, Campaign.model_validate(data), producer="publisher/t",
                                  settings=settings)
    assert published.dry_run is False and [status for status, _, _ in lake.requests] == [200]
    record = orjson.loads(bundle.read_bytes(RUN, f"publish/ev-{event.event_id}/publication.json"))
    assert record["acknowledged_by"] == "policy" and record["dry_run_record"].startswith("publish/dry-run/")
    before = orjson.loads(bundle.read_bytes(RUN, f"publish/ev-{alone.event_id}/publication.json"))
    assert before["dry_run_record"] == record["dry_run_record"]
    dry_run = orjson.loads(bundle.read_bytes(RUN, record["dry_run_record"]))
    assert dry_run["manifest_sha256"] == record["manifest_sha256"]
    token_nowhere(bundle)


async def test_the_token_goes_only_to_a_listed_target_and_an_unlisted_one_sees_no_connection(bundle, lake, token_file):
    settings = RuntimeSettings(instance="t", publish_token_file=str(token_file), publish_ca_bundle=str(lake.ca))
    # The campaign's reviewed target is file://published; the lake is named by the caller alone.
    for acknowledged_by in (None, "cli"):  # the dry run, then the live call with the typed acknowledgement
        with pytest.raises(PublishRefused, match="SPECDEC_PUBLISH_ALLOWED_TARGETS") as caught:
            await publish_report(bundle, RUN, lake.url, acknowledged_by=acknowledged_by, settings=settings, policy=FAST)
        assert "\n" not in str(caught.value) and TOKEN not in str(caught.value)
    # A lookalike of a listed prefix: its text starts with the listed URL, its userinfo hides that the
    # connection would go to 127.0.0.1, the lake.
    port = lake.http.port
    near = RuntimeSettings(instance="t", publish_token_file=str(token_file), publish_ca_bundle=str(lake.ca),
                           publish_allowed_targets=f"https://localhost:{port}/lake")
    for acknowledged_by in (None, "cli"):
        with pytest.raises(PublishRefused, match="SPECDEC_PUBLISH_ALLOWED_TARGETS"):
            await publish_report(bundle, RUN, f"https://localhost:{port}@127.0.0.1:{port}/lake/reports",
                                 acknowledged_by=acknowledged_by, settings=near, policy=FAST)
    assert lake.http.connections == 0 and lake.requests == []
    token_nowhere(bundle)
    # The same listener, listed: it receives the token.
    listed = RuntimeSettings(instance="t", publish_token_file=str(token_file), publish_ca_bundle=str(lake.ca),
                             publish_allowed_targets=f"https://127.0.0.1:{port}/lake/")
    pub = await _live(bundle, lake.url, listed)
    assert not pub.dry_run and [status for status, _, _ in lake.requests] == [200]
    assert lake.requests[0][1]["authorization"] == f"Bearer {TOKEN}" and lake.http.connections >= 1
    token_nowhere(bundle)
