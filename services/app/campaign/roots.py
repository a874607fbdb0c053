"""The folders an entry point lets a caller's paths read from: the MCP server's roots (SPECDEC_MCP_ROOTS).

The CLI reads what its user names (the user owns the shell). The MCP server reads what an agent names, and an
agent can be talked into naming any file the server can read: there a campaign file, the matrix file and the
traffic file it names are read only under the configured roots. A path is resolved first (`..` and every
symlink followed, from the server's working directory), then checked; one outside is refused with one message,
the same whether or not the path exists, so the refusal tells nothing about the files outside.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from services.runtime.errors import ConfigurationError


class OutsideRoots(ConfigurationError):
    """A path a caller named resolves outside the roots it may read; nothing was read."""


@dataclass(frozen=True)
class FileRoots:
    """Resolved folders; a path is readable when it resolves to one of them or below."""

    roots: tuple[Path, ...]
    setting: str = "SPECDEC_MCP_ROOTS"

    @classmethod
    def of(cls, folders: Iterable[Path | str], base: Path | None = None) -> FileRoots:
        here = base if base is not None else Path.cwd()
        return cls(tuple(dict.fromkeys((here / folder).resolve() for folder in folders)))

    @classmethod
    def parse(cls, text: str, base: Path | None = None) -> FileRoots:
        """`os.pathsep`-separated folders, relative ones from `base` (the working directory); empty: `base`."""
        folders = [part for part in text.split(os.pathsep) if part.strip()]
        return cls.of(folders or ["."], base)

    def confine(self, path: Path | str, what: str) -> Path:
        """`path` resolved, when it lies under a root; OutsideRoots otherwise, in words that never depend on
        whether or what the path is."""
        try:
            resolved = (Path.cwd() / path).resolve()
        except (OSError, RuntimeError):  # a symlink loop: refused as any path outside
            resolved = None
        if resolved is None or not any(resolved.is_relative_to(root) for root in self.roots):
            raise OutsideRoots(
                f"{what} is not under the folders this server reads files from ({self.setting}: "
                f"{os.pathsep.join(map(str, self.roots))}); nothing was read: put the file under one of them, or have "
                f"the operator add its folder to {self.setting}")
        return resolved
