"""URL prefixes compared as parsed URLs, never as text (SPECDEC_PUBLISH_ALLOWED_TARGETS).

Both sides are parsed by httpx, the client that connects, so what is compared is where a request would
go: scheme, host, port and path on a segment boundary. A URL naming a user, or with a dot segment or an
encoded slash, is covered by nothing (docs/security.md#the-publish-token-goes-only-where-it-was-reviewed).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import httpx

DEFAULT_PORTS = {"https": 443, "http": 80}


@dataclass(frozen=True)
class Where:
    """Where a URL sends a request: what a prefix is compared on."""

    scheme: str
    host: str
    port: int
    segments: tuple[str, ...]  # the path's segments, percent-encoded as written; a trailing '/' dropped
    query: str


@dataclass(frozen=True)
class UrlPrefix:
    text: str  # as the operator wrote it
    where: Where

    def covers(self, url: str) -> bool:
        other = where(url)
        if other is None:
            return False
        mine = self.where
        return ((other.scheme, other.host, other.port) == (mine.scheme, mine.host, mine.port)
                and other.segments[:len(mine.segments)] == mine.segments)


def where(url: str) -> Where | None:
    """The parsed destination of an http(s):// URL; None when it is not one, names a user, or has a path
    segment that could climb out of a prefix once the server decodes it."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return None
    if parsed.scheme not in DEFAULT_PORTS or not parsed.raw_host or parsed.userinfo:
        return None
    path = parsed.raw_path.split(b"?", 1)[0].decode("ascii")
    segments = path.split("/")[1:]
    if segments and segments[-1] == "":
        segments.pop()
    for segment in segments:
        decoded = unquote(segment)
        if decoded in (".", "..") or "/" in decoded or "\\" in decoded:
            return None
    return Where(scheme=parsed.scheme, host=parsed.raw_host.decode("ascii").lower(),
                 port=parsed.port or DEFAULT_PORTS[parsed.scheme], segments=tuple(segments),
                 query=parsed.query.decode("ascii"))


def same_destination(a: str, b: str) -> bool:
    """Whether two URLs name the same endpoint (scheme, host, port, path and query; a trailing '/' aside)."""
    first, second = where(a), where(b)
    return first is not None and first == second


def parse_prefixes(value: str, setting: str) -> tuple[UrlPrefix, ...]:
    """The prefixes of `value` (separated by spaces or commas); ValueError naming `setting` and the entry."""
    prefixes = []
    for entry in value.replace(",", " ").split():
        try:
            parsed = httpx.URL(entry)
        except httpx.InvalidURL as exc:
            raise ValueError(f"{setting}: {entry!r} is not a URL ({exc}); give http(s)://HOST[:PORT][/PATH]") from None
        if parsed.scheme not in DEFAULT_PORTS or not parsed.raw_host:
            raise ValueError(f"{setting}: {entry!r} is not an https:// or http:// URL with a host; give "
                             "https://HOST[:PORT][/PATH]")
        if parsed.userinfo or parsed.query or parsed.fragment:
            raise ValueError(f"{setting}: {entry!r} names a user, a query or a fragment; a prefix is "
                             "https://HOST[:PORT][/PATH] only")
        found = where(entry)
        # httpx resolves dot segments: '/reports/..' would silently widen the prefix to the whole host.
        if found is None or any(unquote(s) in (".", "..") for s in urlsplit(entry).path.split("/")):
            raise ValueError(
                f"{setting}: {entry!r} has a '.', '..' or encoded '/' path segment; write the path plainly"
            )
        prefixes.append(UrlPrefix(text=entry, where=found))
    return tuple(prefixes)
