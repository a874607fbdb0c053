"""`s3://BUCKET/PREFIX` publish targets through boto3: keys `<prefix>/<run_id>/<name>`, `manifest.json` last.

Credentials, region, endpoint and trust all come from the standard AWS chain, nothing of specdec's own.
Write-once: before any upload the bucket is proven (HeadBucket) and every key looked at; a key holding
other bytes stops the publish, one holding the same bytes is left alone (docs/lake.md#targets)."""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
)

from services.publisher.errors import PublishConflict, PublishCredentialsError, PublishFailed, PublishTargetError

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_DENIED = {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
           "TokenRefreshRequired", "AllAccessDisabled", "AccountProblem"}
_MISSING = {"404", "NoSuchBucket", "NotFound", "NoSuchKey"}
_CHAIN = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with a profile in "
          "AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE, or run where a role provides them")


@dataclass(frozen=True)
class S3Target:
    bucket: str
    prefix: str  # "" or "a/b": no leading or trailing '/'

    def key(self, run_id: str, name: str) -> str:
        return f"{self.prefix}/{run_id}/{name}" if self.prefix else f"{run_id}/{name}"

    def destination(self, run_id: str) -> str:
        return f"s3://{self.bucket}/{self.key(run_id, '')}"


def parse_s3(target: str) -> S3Target:
    rest = target.removeprefix("s3://")
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise PublishTargetError(
            f"publish target {target!r} names no valid bucket: give s3://BUCKET/PREFIX with BUCKET 3-63 characters of "
            "a-z, 0-9, '.' and '-'"
        )
    parts = prefix.strip("/").split("/") if prefix.strip("/") else []
    if any(p in ("", ".", "..") for p in parts):
        raise PublishTargetError(f"publish target {target!r}: the prefix has an empty, '.' or '..' part; give s3://BUCKET/a/b")
    return S3Target(bucket=bucket, prefix="/".join(parts))


def publish_objects(
    target: S3Target, run_id: str, objects: list[tuple[str, bytes, str]], *, metadata: dict[str, str],
    attempts: int, timeout_s: float,
) -> list[str]:
    """Check, then upload `objects` (name, bytes, content type) in order; the s3:// URI of each. Blocking."""
    client = _client(attempts=attempts, timeout_s=timeout_s)
    where = f"s3://{target.bucket}"
    _call(lambda: client.head_bucket(Bucket=target.bucket), where, "HeadBucket")
    keys = [(target.key(run_id, name), data, content_type) for name, data, content_type in objects]
    conflicts, todo = [], []
    for key, data, content_type in keys:
        held = _held_sha256(client, target.bucket, key)
        if held is None:
            todo.append((key, data, content_type))
        elif held != hashlib.sha256(data).hexdigest():
            conflicts.append(key)
    if conflicts:
        raise PublishConflict(
            f"{where} already holds other bytes under {len(conflicts)} key(s) this publish writes "
            f"({', '.join(conflicts[:3])}{', ...' if len(conflicts) > 3 else ''}); published objects are never "
            "overwritten and nothing was uploaded: publish under another prefix or remove the old objects yourself"
        )
    for done, (key, data, content_type) in enumerate(todo):
        digest = hashlib.sha256(data)
        try:
            # partial binds this iteration's values now, not the loop variables' later ones
            _call(functools.partial(
                client.put_object, Bucket=target.bucket, Key=key, Body=data, ContentType=content_type,
                Metadata={**metadata, "sha256": digest.hexdigest()},
                ChecksumSHA256=base64.b64encode(digest.digest()).decode(),
            ), where, f"PutObject {key}")
        except (PublishFailed, PublishCredentialsError) as exc:
            raise type(exc)(f"{exc.reason} ({done} of {len(todo)} object(s) were uploaded before it; publish again "
                            "to complete: the objects already there are kept)") from None
    return [f"s3://{target.bucket}/{key}" for key, _, _ in keys]


def _client(*, attempts: int, timeout_s: float) -> Any:
    """An S3 client whose credentials were found; none found is an error here, before any request."""
    try:
        session = boto3.session.Session()
        credentials = session.get_credentials()
        if credentials is None:
            raise PublishCredentialsError(f"no AWS credentials found for the s3:// publish target: {_CHAIN}")
        credentials.get_frozen_credentials()  # a role or SSO refresh fails here, not in the first upload
        config = Config(retries={"total_max_attempts": attempts, "mode": "standard"},
                        connect_timeout=timeout_s, read_timeout=timeout_s)
        return session.client("s3", config=config)
    except ProfileNotFound as exc:
        raise PublishCredentialsError(f"AWS credentials unusable: {exc}; set AWS_PROFILE to a profile that exists, "
                                      "or unset it") from None
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise PublishCredentialsError(f"AWS credentials unusable: {exc}; {_CHAIN}") from None
    except BotoCoreError as exc:
        raise PublishCredentialsError(f"AWS credentials or configuration unusable: {exc}") from None


def _call(request: Any, where: str, what: str) -> Any:
    """One S3 request, its failures mapped to the publisher's errors."""
    try:
        return request()
    except (ClientError, BotoCoreError) as exc:
        raise _mapped(exc, where, what) from None


def _mapped(exc: ClientError | BotoCoreError, where: str, what: str) -> Exception:
    """The publisher's error for a boto3 failure; its message names no secret and says what to do."""
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return PublishCredentialsError(f"AWS credentials unusable: {exc}; {_CHAIN}")
    if isinstance(exc, EndpointConnectionError):
        return PublishFailed(
            f"the S3 endpoint of {where} did not answer ({exc}); nothing was uploaded by {what}: check "
            "AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) and the network"
        )
    if not isinstance(exc, ClientError):
        return PublishFailed(f"{where}: {what} failed: {exc}")
    code, status = _code(exc)
    if code in _DENIED or status == 403:
        return PublishCredentialsError(
            f"{where} refused the AWS credentials ({what}: {code}, HTTP {status}); nothing was uploaded by it: check "
            "that the credentials are valid and allow s3:ListBucket, s3:GetObject and s3:PutObject on the bucket"
        )
    if what == "HeadBucket" and (code in _MISSING or status == 404):
        return PublishTargetError(f"{where} does not exist ({code}): create the bucket or fix the publish target")
    if status == 301 or code in {"PermanentRedirect", "AuthorizationHeaderMalformed"}:
        return PublishTargetError(f"{where} lies in another region than the client's ({code}): set AWS_REGION to the "
                                  "bucket's region")
    message = exc.response.get("Error", {}).get("Message", "")
    return PublishFailed(f"{where}: {what} failed ({code}, HTTP {status}): {message}")


def _code(exc: ClientError) -> tuple[str, int | None]:
    return (str(exc.response.get("Error", {}).get("Code", "?")),
            exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode"))


def _held_sha256(client: Any, bucket: str, key: str) -> str | None:
    """sha256 of what the key holds now; None when it holds nothing."""
    where, what = f"s3://{bucket}", f"HeadObject {key}"
    try:
        head = client.head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        code, status = _code(exc)
        if code in _MISSING or status == 404:
            return None
        raise _mapped(exc, where, what) from None
    except BotoCoreError as exc:
        raise _mapped(exc, where, what) from None
    recorded = head.get("Metadata", {}).get("sha256")
    if recorded:
        return recorded
    # Written by something other than specdec: hash the bytes themselves.
    body = _call(lambda: client.get_object(Bucket=bucket, Key=key)["Body"].read(), where, f"GetObject {key}")
    return hashlib.sha256(body).hexdigest()
