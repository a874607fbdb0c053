"""`python -m services.runtime.main SERVICE`: run one service instance."""

from __future__ import annotations

import asyncio
import sys

from services.runtime import apps, logs
from services.runtime.bundle import BundleStore
from services.runtime.reconcile import reconcile
from services.runtime.service import bootstrap, serve
from services.runtime.settings import RuntimeSettings


def resources_for(settings: RuntimeSettings) -> dict[str, object]:
    """What a service's routes may use besides the broker: the bundle store."""
    return {"bundle": BundleStore(settings.bundle_root)}


async def run(name: str, settings: RuntimeSettings) -> None:
    log = logs.configure(name, settings.log_level).bind(instance=settings.instance)
    module = apps.load(name)
    resources = resources_for(settings)
    service = bootstrap(name, module.routes(resources), settings=settings, resources=resources)
    cleaned = await reconcile(name, service.consumer.ledger)
    for proc in cleaned:
        log.warning("reconciled: killed unowned labelled process", pid=proc.pid, run_id=proc.run_id)
    await serve(service)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: python -m services.runtime.main SERVICE  (one of: {', '.join(apps.available())})", file=sys.stderr)
        return 2
    asyncio.run(run(args[0], RuntimeSettings()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
