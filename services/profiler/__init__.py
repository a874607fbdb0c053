"""The profiler: profile representative traffic (or named workload shapes) into PROFILE.json.

Pure domain logic, files in and a `Profile` out: `profile_traffic(path, ...)` and `profile_shapes(names)`;
the service wrapper is services.profiler.app (docs/profiler.md). The names below are loaded on first use
(PEP 562), so that `specdec`'s parser can read the profiler's defaults without importing numpy."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DEFAULT_REJECT_THRESHOLD": "services.profiler.defaults",
    "DEFAULT_SAMPLE_CAP": "services.profiler.defaults",
    "EmptyTraffic": "services.profiler.errors",
    "ProfilerError": "services.profiler.errors",
    "TooManyRejected": "services.profiler.errors",
    "TrafficNotFound": "services.profiler.errors",
    "profile_shapes": "services.profiler.profile",
    "profile_traffic": "services.profiler.profile",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'services.profiler' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
