"""A secret a setting names but never holds, read from an environment variable or a file (a mounted secret).

One reader for the MCP server's bearer token (services/mcp/auth.py), the Redis URL file
(services/runtime/settings.py) and the publish token (services/publisher/publish/credentials.py);
each caller words its own errors, naming the setting and never the secret.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path


class SecretFileError(Exception):
    """A secret's file cannot be used."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path


class Unreadable(SecretFileError):
    """The file cannot be opened or read, or is not UTF-8 text; `error` is what was raised."""

    def __init__(self, path: Path, error: OSError | UnicodeDecodeError) -> None:
        self.error = error
        super().__init__(path, f"{path}: {self.reason}")

    @property
    def reason(self) -> str:
        """The operating system's words (e.g. "No such file or directory"), or "not UTF-8 text"."""
        if isinstance(self.error, UnicodeDecodeError):
            return "not UTF-8 text"
        return self.error.strerror or str(self.error)


class OpenToOthers(SecretFileError):
    """Group or others have some access to a file only its owner may read; `mode` is its st_mode."""

    def __init__(self, path: Path, mode: int) -> None:
        self.mode = mode
        super().__init__(path, f"{path} is open to group or others (mode {stat.filemode(mode)})")


def from_env(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The variable's value without surrounding whitespace; "" when it is unset."""
    return (os.environ if environ is None else environ).get(name, "").strip()


def from_file(path: str | Path, *, owner_only: bool = False) -> str:
    """The file's UTF-8 text without surrounding whitespace (Unreadable otherwise). With `owner_only`, a file
    that group or others may access in any way is OpenToOthers: the secret may have leaked to them."""
    path = Path(path)
    try:
        mode = path.stat().st_mode if owner_only else 0
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(path, exc) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise OpenToOthers(path, mode)
    return text.strip()
