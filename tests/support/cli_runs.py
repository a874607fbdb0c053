"""Fixtures for tests that call the CLI's `main()` in-process, and for tests that need the local Slurm."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """main() points logging and structlog at the captured stderr of the test; put them back on the
    session's stderr so later tests do not log into a closed capture buffer. Autouse where imported."""
    yield
    structlog.reset_defaults()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, force=True)


def ensure_slurm() -> dict[str, str]:
    """The single-node Slurm's environment from infra/bin/ensure-slurm; the test is skipped without one."""
    done = subprocess.run([str(ROOT / "infra/bin/ensure-slurm")], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.skip(f"no single-node Slurm here: {done.stderr.strip()[-300:]}")
    return dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)
