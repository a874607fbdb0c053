"""Defaults of `profile_traffic`: profiler settings, not part of PROFILE.json's schema.

Here (not in profile.py) so the CLI parser can show them without importing numpy.
"""

from __future__ import annotations

DEFAULT_REJECT_THRESHOLD = 0.05
DEFAULT_SAMPLE_CAP = 10_000
