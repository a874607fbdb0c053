"""A run's bundle files as MCP resources: `bundle://RUN_ID/PATH`, the URIs the events and tools carry.

Confined to the bundle and read-only: only recorded artifacts (hash-checked on read), the manifest
and the journal are served, and a file carrying the operator's commands is served with every
secret-bearing value masked (docs/mcp.md#resources-the-runs-bundle).
"""

from __future__ import annotations

from collections.abc import Callable

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from contracts import layout
from services.runtime.bundle.bundle import ArtifactMissing, BundleError, BundleStore

# suffix -> MIME type; text is served as text, the rest as bytes. Longest suffix first where one ends another.
_TYPES = {
    ".jsonl": "application/x-ndjson",
    ".json": "application/json",
    ".md": "text/markdown",
    ".html": "text/html",
    ".yaml": "application/yaml",
    ".log": "text/plain",
    ".txt": "text/plain",
    ".png": "image/png",
}
_BINARY = {"image/png", "application/octet-stream"}


def read_file(bundle: BundleStore, run_id: str, relpath: str) -> bytes:
    """The bytes of one file of the run's bundle; ResourceNotFoundError / ResourceError otherwise."""
    try:
        if relpath in (layout.MANIFEST, layout.EVENTS):
            path = bundle.manifest_path(run_id) if relpath == layout.MANIFEST else bundle.events_path(run_id)
            if not bundle.exists(run_id):
                raise ResourceNotFoundError(f"no run {run_id} under {bundle.root}")
            try:
                return path.read_bytes()
            except FileNotFoundError:
                raise ResourceNotFoundError(f"run {run_id} has no {relpath} yet") from None
        return _masked(relpath, bundle.read_bytes(run_id, relpath))  # validated, confined, hash-checked
    except ArtifactMissing as exc:
        raise ResourceNotFoundError(str(exc)) from None
    except BundleError as exc:
        raise ResourceError(str(exc)) from None


# Files that hold the operator's commands as written (a launch gets the real value of a secret-bearing
# argument; a reader gets it masked: docs/configuration.md, "Secret-bearing arguments are masked").
_COMMANDS = {layout.CAMPAIGN_YAML, layout.CAMPAIGN, layout.CANONICAL, *layout.PLAN_PATHS.values()}


def _masked(relpath: str, data: bytes) -> bytes:
    """A file that carries a command (or a server's log of its arguments) with secret-bearing values masked."""
    if relpath not in _COMMANDS and not relpath.endswith(("/argv.json", ".log")):
        return data
    from services.shared.secret_args import mask_text

    try:
        return mask_text(data.decode("utf-8")).encode("utf-8")
    except UnicodeDecodeError:
        return data


def register(server: MCPServer, bundle: BundleStore) -> None:
    for suffix, mime in _TYPES.items():
        _template(server, bundle, f"bundle://{{run_id}}/{{+stem}}{suffix}", name=f"bundle_{suffix[1:]}", mime=mime,
                  relpath=_suffixed(suffix))
    _template(server, bundle, "bundle://{run_id}/{+path}", name="bundle_file", mime="application/octet-stream",
              relpath=lambda path: path)


def _suffixed(suffix: str) -> Callable[[str], str]:
    return lambda stem: stem + suffix


def _template(server: MCPServer, bundle: BundleStore, uri: str, *, name: str, mime: str,
              relpath: Callable[[str], str]) -> None:
    binary = mime in _BINARY
    variable = uri.rsplit("{+", 1)[1].split("}")[0]
    description = (f"A file of the run's evidence bundle ({mime}): a recorded artifact (hash-checked), or the run's "
                   "manifest.json or events.jsonl.")

    def read(run_id: str, **parts: str) -> str | bytes:
        data = read_file(bundle, run_id, relpath(parts[variable]))
        if binary:
            return data
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data  # served as bytes rather than mangled

    # The SDK matches a template's variables to the function's parameters by name.
    if variable == "stem":
        def handler(run_id: str, stem: str) -> str | bytes:
            return read(run_id, stem=stem)
    else:
        def handler(run_id: str, path: str) -> str | bytes:  # type: ignore[misc]  # the names differ on purpose
            return read(run_id, path=path)

    server.resource(uri, name=name, description=description, mime_type=mime)(handler)
