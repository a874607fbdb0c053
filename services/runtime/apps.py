"""Which services exist, and where their entrypoints live.

Each entry is a module with `NAME` and `routes(resources) -> list[Route]`.
`specdec up`, compose.yaml and the docs read this table; a service of the
catalogue that is not here yet is reported as not running, never faked.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from contracts.catalogue import SERVICES as SERVICES  # re-exported: the catalogue's names, next to the table

APP_MODULES: dict[str, str] = {
    "journal": "services.journal.app",
    "profiler": "services.profiler.app",
    "corpus": "services.corpus.app",
    "capacity": "services.capacity.app",
    "trainer-proxy": "services.trainer_proxy.app",
    "bench-runner": "services.bench.app",
    "gate": "services.gate.app",
    "publisher": "services.publisher.app",
}


def available() -> list[str]:
    return [name for name in SERVICES if name in APP_MODULES]


def missing() -> list[str]:
    return [name for name in SERVICES if name not in APP_MODULES]


def load(name: str) -> ModuleType:
    if name not in APP_MODULES:
        raise KeyError(f"no service named {name!r}; available: {', '.join(available())}")
    return importlib.import_module(APP_MODULES[name])
