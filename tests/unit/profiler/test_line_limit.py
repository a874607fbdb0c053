"""Issue 40: a traffic file written as one JSON array (one huge line) is refused in bounded memory.

The profiler and the corpus step read traffic a line at a time; a line is held whole, so one line the size
of the file (a JSON array export) used to be read and parsed whole: a 120 MB file peaked at 1.0 GB, and a
multi-GB export got the profiler OOM-killed on every restart. Now no line over `MAX_LINE_BYTES` is ever
held: the step refuses the file with one line naming the limit and the fix.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from services.shared.text.errors import TrafficLineTooLong
from services.shared.text.lines import MAX_LINE_BYTES

REPO_ROOT = Path(__file__).resolve().parents[3]

# The child measures its own growth: peak resident memory (VmHWM) after the work minus before it, so the
# interpreter and its imports do not count. Reading and parsing a 64 MB array whole grows it by hundreds of MB.
_CHILD = """
import json, sys
from tests.perf.peak import peak_kb
from services.profiler.profile import profile_traffic
from services.runtime.errors import StepFailed
before = peak_kb()
try:
    profile_traffic(sys.argv[1])
    error = None
except StepFailed as exc:
    error = [type(exc).__name__, str(exc)]
print(json.dumps({"growth_kb": peak_kb() - before, "error": error}))
"""

# Measured: +32 MB (readline's buffer and the line it returns, each up to the 16 MiB limit), the same for a
# 64 MiB or a 512 MiB array; the old whole read grew it by 249 MB for this 64 MiB file.
GROWTH_BOUND_MB = 64


def _array_file(path: Path, target_bytes: int) -> int:
    """One JSON array of flat records on a single line, about `target_bytes` long."""
    record = orjson.dumps({"prompt": "the user asks about " + "data " * 30, "completion": "an answer " * 20,
                           "input_tokens": 120, "output_tokens": 60})
    n = target_bytes // (len(record) + 1)
    with path.open("wb") as f:
        f.write(b"[")
        f.write(b",".join([record] * n))
        f.write(b"]\n")
    return path.stat().st_size


@pytest.mark.timeout(60)
def test_a_one_line_array_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    size = _array_file(path, 64 * 1024 * 1024)
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path)], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=False, timeout=50)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    growth_mb = out["growth_kb"] / 1024
    assert growth_mb < GROWTH_BOUND_MB, (
        f"profiling a {size / 2**20:.0f} MiB one-line array grew memory by {growth_mb:.0f} MB"
    )
    assert out["error"] is not None, "a file whose only line is over the limit must be refused"
    name, message = out["error"]
    assert name == "TrafficLineTooLong"
    assert "\n" not in message
    assert "line 1 of" in message and "16 MiB" in message and "one request a line" in message


def test_a_line_over_the_limit_is_refused_by_the_corpus_scan_too(tmp_path: Path) -> None:
    from services.corpus.traffic import scan

    path = tmp_path / "traffic.jsonl"
    good = orjson.dumps({"prompt": "hello there", "completion": "hi", "input_tokens": 3, "output_tokens": 2})
    with path.open("wb") as f:
        f.write(good + b"\n")
        f.write(b'{"prompt": "' + b"x" * (MAX_LINE_BYTES + 10) + b'"}\n')
        f.write(good + b"\n")
    with pytest.raises(TrafficLineTooLong) as caught:
        scan(path, None, None)
    message = str(caught.value)
    assert "line 2 of" in message and "16 MiB" in message and "\n" not in message


def test_lines_up_to_the_limit_are_read(tmp_path: Path) -> None:
    """The limit refuses only what is over it: a line of exactly MAX_LINE_BYTES (newline included) is profiled."""
    from services.profiler.profile import profile_traffic

    path = tmp_path / "traffic.jsonl"
    head = b'{"prompt": "'
    tail = b'", "input_tokens": 5, "output_tokens": 4}\n'
    with path.open("wb") as f:
        f.write(head + b"y" * (MAX_LINE_BYTES - len(head) - len(tail)) + tail)
        f.write(b'{"prompt": "short", "input_tokens": 1, "output_tokens": 1}\n')
    profile = profile_traffic(path)
    assert profile.records.accepted == 2
    assert profile.input.size_bytes == path.stat().st_size
