"""The container health check: `python -m services.runtime.health.healthcheck check --port N`.

Exits 0 when the instance's endpoint on 127.0.0.1:N answers `GET /health` with
200 (no curl needed in the image); otherwise prints what it saw and exits 1.
Stdlib only, so the probe starts fast and imports nothing of the service.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence

from services.runtime.environment import startup_problem


def check(port: int, host: str = "127.0.0.1", timeout_s: float = 5.0) -> tuple[bool, str]:
    """(healthy, what was seen) for the endpoint at host:port."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=timeout_s) as response:
            return response.status == 200, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return False, exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as exc:
        return False, f"no answer from {host}:{port}: {exc}"


def main(argv: Sequence[str] | None = None) -> int:
    problem = startup_problem()  # first: a misspelt SPECDEC_* variable would be ignored
    if problem is not None:
        print(f"healthcheck: {problem}", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog="python -m services.runtime.health.healthcheck")
    sub = parser.add_subparsers(dest="command", required=True)
    probe = sub.add_parser("check", help="exit 0 when GET /health answers 200")
    probe.add_argument("--port", type=int, required=True, help="the instance's SPECDEC_HEALTH_PORT")
    probe.add_argument("--host", default="127.0.0.1")
    probe.add_argument("--timeout-s", type=float, default=5.0)
    args = parser.parse_args(argv)
    healthy, seen = check(args.port, args.host, args.timeout_s)
    if not healthy:
        print(seen, file=sys.stderr)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
