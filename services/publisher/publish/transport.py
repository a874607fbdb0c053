"""POST a report to an HTTP(S) endpoint with retries and exponential backoff, recording every attempt.

One multipart POST: a `manifest` part and one `file` part per file, bytes unchanged, so the receiver can
check each against the manifest; `Idempotency-Key` is the same on every retry. The token is in the
Authorization header only: the record keeps the response's headers, never the request's
(docs/publisher.md#publishing)."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import httpx
from pydantic import Field

from contracts import layout
from contracts.envelope import Strict
from services.publisher.publish.credentials import BearerToken

RECORD_VERSION: Final = 1
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
MAX_BODY_CHARS = 65536  # of a response body kept in the record


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try; fixed by specdec (not an operator setting), smaller in tests."""

    attempts: int = 5
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    timeout_s: float = 30.0


class Attempt(Strict):
    """One POST and what came back."""

    attempt: int = Field(ge=1, description="1 for the first POST.")
    waited_s: float = Field(ge=0, description="Backoff slept before this attempt, seconds.")
    status: int | None = Field(description="HTTP status; None when no response came (error set).")
    headers: dict[str, str] = Field(description="Response headers (lower-case names; repeated ones joined by ', ').")
    body: str = Field(
        description="Response body as text (UTF-8, undecodable bytes replaced), at most 65536 characters."
    )
    body_truncated: bool = Field(description="True when the body was longer than what is kept.")
    error: str | None = Field(description="Transport error (connect, timeout, ...) when no response came.")
    elapsed_s: float = Field(ge=0, description="Time from sending to the response or the error, seconds.")


class HttpRecord(Strict):
    """Every attempt of one HTTP publish: stored as publish/<key>/response.json."""

    version: Literal[1] = Field(default=RECORD_VERSION, description="Version of this record.")
    url: str = Field(description="The endpoint POSTed to.")
    idempotency_key: str = Field(description="Idempotency-Key header sent with every attempt.")
    attempts: list[Attempt] = Field(min_length=1, description="Every attempt, in order.")
    outcome: Literal["accepted", "refused", "unreachable"] = Field(
        description="accepted: a 2xx came back; refused: a final non-2xx status; unreachable: retries exhausted."
    )

    @property
    def final(self) -> Attempt:
        return self.attempts[-1]


@dataclass(frozen=True)
class Part:
    name: str  # file name under report/
    data: bytes
    content_type: str


Sleep = Callable[[float], Awaitable[None]]


async def post_report(
    url: str,
    *,
    manifest: bytes,
    parts: Sequence[Part],
    headers: dict[str, str],
    idempotency_key: str,
    token: BearerToken | None = None,
    verify: ssl.SSLContext | bool = True,
    policy: RetryPolicy = RetryPolicy(),
    sleep: Sleep = asyncio.sleep,
    transport: httpx.AsyncBaseTransport | None = None,
) -> HttpRecord:
    """POST until accepted, refused, or out of attempts; never raises for an HTTP outcome."""
    files = [("manifest", (layout.PUBLISHED_MANIFEST, manifest, "application/json"))]
    files += [("file", (p.name, p.data, p.content_type)) for p in parts]
    sent_headers = {**headers, "Idempotency-Key": idempotency_key}
    if token is not None:
        sent_headers["Authorization"] = token.header()
    attempts: list[Attempt] = []
    waited = 0.0
    # No redirects: a redirect would carry the Authorization header (and the report) somewhere not configured.
    async with httpx.AsyncClient(timeout=policy.timeout_s, transport=transport, verify=verify,
                                 follow_redirects=False) as client:
        for n in range(1, policy.attempts + 1):
            started = time.monotonic()
            try:
                response = await client.post(url, files=files, headers=sent_headers)
            except httpx.TransportError as exc:
                attempts.append(_error_attempt(n, waited, exc, time.monotonic() - started))
                retry_after = None
            else:
                attempts.append(_response_attempt(n, waited, response, time.monotonic() - started))
                if response.is_success:
                    return HttpRecord(url=url, idempotency_key=idempotency_key, attempts=attempts, outcome="accepted")
                if response.status_code not in RETRY_STATUSES:
                    return HttpRecord(url=url, idempotency_key=idempotency_key, attempts=attempts, outcome="refused")
                retry_after = _retry_after(response)
            if n < policy.attempts:
                waited = min(policy.max_backoff_s,
                             retry_after if retry_after is not None else policy.backoff_s * 2 ** (n - 1))
                await sleep(waited)
    outcome: Literal["refused", "unreachable"] = "unreachable" if attempts[-1].status is None else "refused"
    return HttpRecord(url=url, idempotency_key=idempotency_key, attempts=attempts, outcome=outcome)


def _response_attempt(n: int, waited: float, response: httpx.Response, elapsed: float) -> Attempt:
    text = response.content.decode("utf-8", errors="replace")
    headers: dict[str, str] = {}
    for name, value in response.headers.multi_items():
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return Attempt(
        attempt=n, waited_s=waited, status=response.status_code, headers=headers, body=text[:MAX_BODY_CHARS],
        body_truncated=len(text) > MAX_BODY_CHARS, error=None, elapsed_s=elapsed,
    )


def _error_attempt(n: int, waited: float, exc: httpx.TransportError, elapsed: float) -> Attempt:
    return Attempt(
        attempt=n, waited_s=waited, status=None, headers={}, body="", body_truncated=False,
        error=f"{type(exc).__name__}: {exc}", elapsed_s=elapsed,
    )


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: fall back to the exponential backoff
        return None
