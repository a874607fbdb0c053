"""Publishing to an S3 lake: a real S3 API (moto's server, its own process on loopback) through boto3.

Every object the manifest lists is in the bucket under PREFIX/RUN_ID/ with the
manifest's sha256; a re-publish writes the same keys and bytes; missing or
refused credentials, a missing bucket and an endpoint that does not answer stop
the publish before anything is uploaded, with a message that says what to do.
"""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import orjson
import pytest

from services.publisher.errors import (
    PublishConflict,
    PublishCredentialsError,
    PublishFailed,
    PublishRefused,
    PublishTargetError,
)
from services.publisher.pipeline import render_run
from services.publisher.publish.publish import publish_report
from services.publisher.publish.transport import RetryPolicy
from services.runtime.bundle.bundle import BundleStore
from services.runtime.settings import RuntimeSettings
from tests.unit.publisher.synthetic import RUN, Spec, build

BUCKET = "lake"
TARGET = f"s3://{BUCKET}/speculative/reports"
PREFIX = f"speculative/reports/{RUN}/"
SETTINGS = RuntimeSettings(instance="t")
ONE_TRY = RetryPolicy(attempts=1, timeout_s=5.0)
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                 "AWS_CA_BUNDLE")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Moto:
    """moto's S3 server in a process of its own; `admin` is a client that bypasses the chain under test."""

    def __init__(self, log: Path) -> None:
        self.url = f"http://127.0.0.1:{_free_port()}"
        self.log = log.open("wb")
        self.proc = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1",
                                      "-p", self.url.rsplit(":", 1)[1]], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{self.url}/moto-api/", timeout=1.0)
                break
            except httpx.TransportError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start; see {log}") from None
                time.sleep(0.1)
        self.admin = boto3.client("s3", endpoint_url=self.url, aws_access_key_id="admin", aws_secret_access_key="admin",
                                  region_name="us-east-1")

    def objects(self) -> dict[str, bytes]:
        listed = self.admin.list_objects_v2(Bucket=BUCKET).get("Contents", [])
        return {o["Key"]: self.admin.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listed}

    def authenticate(self, on: bool) -> None:
        """From now on, refuse (on) or accept (off) every request whose keys moto's IAM does not know."""
        httpx.post(f"{self.url}/moto-api/reset-auth", content=b"0" if on else b"inf").raise_for_status()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def moto(tmp_path: Path) -> Iterator[Moto]:
    server = Moto(tmp_path / "moto.log")
    server.admin.create_bucket(Bucket=BUCKET)
    yield server
    server.close()


@pytest.fixture
def chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An AWS chain with nothing in it: no variables, empty credential and config files, no instance role."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "aws-empty"
    empty.write_text("")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return empty


@pytest.fixture
def aws(chain: Path, moto: Moto, monkeypatch: pytest.MonkeyPatch) -> Moto:
    """The chain pointed at the moto server with a key pair (moto checks no signature until `authenticate`)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAPUBLISHERTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "publisher-test-secret")
    return moto


@pytest.fixture
def bundle(tmp_path: Path) -> BundleStore:
    store = BundleStore(tmp_path / "bundles", fsync=False)
    build(store, Spec())
    render_run(store, RUN)
    return store


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def _live(bundle: BundleStore, target: str = TARGET, **kw):
    await publish_report(bundle, RUN, target, acknowledged_by=None, settings=SETTINGS, **kw)  # the dry run first
    return await publish_report(bundle, RUN, target, acknowledged_by="cli", settings=SETTINGS, **kw)


async def test_every_object_matches_the_manifest_and_a_republish_writes_the_same_keys_and_bytes(bundle, aws):
    dry = await publish_report(bundle, RUN, TARGET, acknowledged_by=None, settings=SETTINGS)
    assert dry.dry_run and dry.destination == f"s3://{BUCKET}/{PREFIX}" and aws.objects() == {}
    with pytest.raises(PublishRefused):  # a dry run to one target does not count for another
        await publish_report(bundle, RUN, f"s3://{BUCKET}/elsewhere", acknowledged_by="cli", settings=SETTINGS)
    pub = await publish_report(bundle, RUN, TARGET, acknowledged_by="cli", settings=SETTINGS)
    assert not pub.dry_run and pub.external and pub.acknowledged_by == "cli"
    stored = aws.objects()
    manifest_bytes = stored[PREFIX + "manifest.json"]
    assert sha(manifest_bytes) == pub.manifest_sha256 == dry.manifest_sha256
    manifest = orjson.loads(manifest_bytes)
    listed = {e["name"]: e for e in (*manifest["files"], *manifest["evidence"])}
    assert set(stored) == {PREFIX + name for name in listed} | {PREFIX + "manifest.json"}
    for name, entry in listed.items():
        data = stored[PREFIX + name]
        assert sha(data) == entry["sha256"] and len(data) == entry["size_bytes"]
        head = aws.admin.head_object(Bucket=BUCKET, Key=PREFIX + name)
        assert head["ContentType"] == entry["content_type"] and head["Metadata"]["sha256"] == entry["sha256"]
        assert head["Metadata"]["specdec-run-id"] == RUN
    # What the lake holds is the bundle's evidence, byte for byte: the report, every trial result, the decision.
    assert {"report.html", "report.md", "evidence/gate/DECISION.json", "evidence/report/report.json"} <= set(listed)
    assert len([n for n in listed if n.startswith("evidence/bench/")]) == 12
    for name in listed:
        relpath = f"report/{name}" if not name.startswith("evidence/") else name.removeprefix("evidence/")
        assert bundle.ref(RUN, relpath).sha256 == listed[name]["sha256"]
    assert pub.written == [f"s3://{BUCKET}/{key}" for key in [*(PREFIX + n for n in listed), PREFIX + "manifest.json"]]
    assert pub.written[-1].endswith("/manifest.json")  # last: whoever finds it finds every file it lists
    modified = {k: aws.admin.head_object(Bucket=BUCKET, Key=k)["LastModified"] for k in stored}

    again = await publish_report(bundle, RUN, TARGET, acknowledged_by="cli", settings=SETTINGS)
    assert again.key != pub.key and again.written == pub.written and again.manifest_sha256 == pub.manifest_sha256
    assert aws.objects() == stored
    assert {k: aws.admin.head_object(Bucket=BUCKET, Key=k)["LastModified"] for k in stored} == modified


async def test_a_key_holding_other_bytes_stops_the_publish_before_any_upload(bundle, aws):
    aws.admin.put_object(Bucket=BUCKET, Key=PREFIX + "report.md", Body=b"someone else's report\n")
    with pytest.raises(PublishConflict, match="nothing was uploaded") as caught:
        await _live(bundle)
    assert PREFIX + "report.md" in str(caught.value)
    assert aws.objects() == {PREFIX + "report.md": b"someone else's report\n"}


async def test_no_credentials_anywhere_fails_before_any_upload(bundle, chain, moto, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.url)  # the chain has an endpoint, an empty file, no keys
    with pytest.raises(PublishCredentialsError, match="no AWS credentials found.*AWS_ACCESS_KEY_ID"):
        await _live(bundle)
    assert moto.objects() == {}


async def test_a_profile_that_is_not_in_the_config_fails_before_any_upload(bundle, chain, moto, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.url)
    monkeypatch.setenv("AWS_PROFILE", "lake-writer")  # the config and credentials files are empty
    with pytest.raises(PublishCredentialsError, match="lake-writer.*AWS_PROFILE"):
        await _live(bundle)
    assert moto.objects() == {}


async def test_refused_credentials_fail_at_the_bucket_check_before_any_upload(bundle, aws):
    aws.authenticate(True)  # moto's IAM knows no such key: HeadBucket answers 403
    try:
        with pytest.raises(PublishCredentialsError, match="refused the AWS credentials.*HeadBucket") as caught:
            await _live(bundle, policy=ONE_TRY)
    finally:
        aws.authenticate(False)
    assert "publisher-test-secret" not in str(caught.value) and aws.objects() == {}


async def test_a_missing_bucket_and_a_silent_endpoint_fail_before_any_upload(bundle, aws, monkeypatch):
    with pytest.raises(PublishTargetError, match="s3://no-such-lake does not exist"):
        await _live(bundle, "s3://no-such-lake/reports")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")  # nobody listens there
    started = time.monotonic()
    with pytest.raises(PublishFailed, match="did not answer.*AWS_ENDPOINT_URL"):
        await _live(bundle, policy=ONE_TRY)
    assert time.monotonic() - started < 30 and aws.objects() == {}


def test_s3_targets_are_checked():
    from services.publisher.publish.publish import parse_target

    assert parse_target("s3://lake/a/b/").prefix == "a/b" and parse_target("s3://lake").prefix == ""
    assert parse_target("s3://lake").key(RUN, "manifest.json") == f"{RUN}/manifest.json"
    for bad in ("s3://", "s3://UPPER/x", "s3://a/x", "s3://lake/a//b", "s3://lake/../x"):
        with pytest.raises(PublishTargetError):
            parse_target(bad)
