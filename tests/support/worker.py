"""A counting test service run as a real process by the integration tests.

It consumes profile.requested and emits profile.completed. Its side effect is
recorded outside Redis, in the file WORKER_LOG: "start <event_id> <pid>" when
the handler begins and "done <event_id> <pid>" when it completes, so a test can
count how often the work started and how often it completed.
Env: WORKER_LOG (path), WORKER_SLEEP_S (handler duration), WORKER_FAIL=always
(the handler raises), plus the usual SPECDEC_* settings.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from contracts.events import ProfileCompleted
from services.runtime.delivery.consumer import Route, StepContext
from services.runtime.delivery.service import bootstrap, serve
from services.runtime.health import logs
from services.runtime.settings import RuntimeSettings

SHA = "0" * 64


def _note(line: str) -> None:
    with Path(os.environ["WORKER_LOG"]).open("a") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


async def handle(event, ctx: StepContext):
    _note(f"start {event.event_id} {os.getpid()}")
    await asyncio.sleep(float(os.environ.get("WORKER_SLEEP_S", "0")))
    if os.environ.get("WORKER_FAIL") == "always":
        raise RuntimeError("worker told to fail")
    _note(f"done {event.event_id} {os.getpid()}")
    ref = {"uri": f"bundle://{event.run_id}/profile/profile.json", "sha256": SHA, "size_bytes": 0}
    return [event.caused(ProfileCompleted, producer=f"worker/{os.getpid()}", profile=ref, source="shapes",
                         records_accepted=0, records_rejected=0, recommended_method="ngram")]


def main() -> None:
    settings = RuntimeSettings()
    logs.configure("worker", settings.log_level)
    service = bootstrap("worker", [Route("profile.requested", handle)], settings=settings)
    asyncio.run(serve(service))


if __name__ == "__main__":
    main()
