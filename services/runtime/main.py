"""`python -m services.runtime.main SERVICE`: run one service instance."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from services.runtime import apps, failpoints
from services.runtime.backoff import delays, dropped
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery import history
from services.runtime.delivery.catchup import CatchUp
from services.runtime.delivery.ledger import RedisLedger
from services.runtime.delivery.reconcile import Reconciler, settle_period_s
from services.runtime.delivery.service import Service, bootstrap, serve
from services.runtime.environment import startup_problem
from services.runtime.errors import invalid_input
from services.runtime.health import logs
from services.runtime.processes import procs
from services.runtime.resources import CapacityRunner, NodeCheck, Resources, TrainingRecheck
from services.runtime.settings import RuntimeSettings


def resources_for(
    settings: RuntimeSettings, *, bundle: BundleStore | None = None, bench_recheck: NodeCheck | None = None,
    training_recheck: TrainingRecheck | None = None, capacity_runner: CapacityRunner | None = None,
) -> Resources:
    """A service's resources, built once per service: the bundle store at settings.bundle_root unless
    `bundle` is given; a test's doubles for the steps' checks against the cluster (None: the step's own)."""
    return Resources(
        bundle=bundle if bundle is not None else BundleStore(settings.bundle_root), bench_recheck=bench_recheck,
        training_recheck=training_recheck, capacity_runner=capacity_runner,
    )


# Backoff while Redis does not answer at start: 0.1 s doubling to at most 5 s.
FIRST_RETRY_S = 0.1
MAX_RETRY_S = 5.0


async def wait_for_redis(ping: Callable[[], Awaitable[Any]], log: Any, *,
                         sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> int:
    """Return once Redis answers; the failed attempts before it.

    A service started while Redis is down or restarting (compose starting both at
    once, a Redis restart during a deploy) waits for it, logging each attempt,
    instead of exiting on its first command; once serving, the consumer rides out
    an outage by itself. SIGTERM stops the wait as it stops the service.
    """
    waits, failures = delays(FIRST_RETRY_S, MAX_RETRY_S), 0
    while True:
        try:
            await ping()
            return failures
        except Exception as exc:
            if not dropped(exc):
                raise  # a wrong password, or anything else waiting does not heal
            failures += 1
            delay = next(waits)
            log.warning("waiting for Redis", error=str(exc), attempt=failures, retry_in_s=delay)
            await sleep(delay)


async def run(name: str, settings: RuntimeSettings) -> None:
    log = logs.configure(name, settings.log_level).bind(instance=settings.instance)
    module = apps.load(name)
    resources = resources_for(settings)
    service = bootstrap(name, module.routes(resources), settings=settings, resources=resources)
    if isinstance(service.consumer.ledger, RedisLedger):
        await wait_for_redis(service.consumer.ledger.client.ping, log)
    deployment = procs.deployment_id(settings.redis_url, settings.stream_prefix)
    procs.label_deployment(deployment)  # before any child starts: every child carries it
    catchup = CatchUp(service, resources.bundle, log)
    # A service's own work after each pass (the journal names the events Redis lost, services/runtime/bundle/gaps.py).
    hook = getattr(module, "after_reconcile", None)
    hooks: set[asyncio.Task[Any]] = set()

    def after_pass() -> None:
        catchup.schedule()
        if hook is not None:
            task = asyncio.get_running_loop().create_task(hook(service, resources, log))
            hooks.add(task)
            task.add_done_callback(hooks.discard)

    bundle = resources.bundle
    ledger = service.consumer.ledger

    reconciler = reconciler_for(service, deployment, log, after_pass=after_pass,
                                lost_state=lambda: history.ledger_lost_state(ledger, bundle, deployment))
    # Before serving, unless Redis lost its state less than a settle period ago: then in
    # the background, once live owners have re-registered their leases (reconcile.py).
    # Each pass is followed by the catch-up over the bundle, which waits until the service serves.
    await reconciler.at_start()
    # The birth this start found: a later start on a younger ledger knows Redis lost this deployment's state.
    await history.mark_ledger(ledger, bundle, deployment)
    try:
        await serve(service, started=catchup.ready.set)
    finally:
        await reconciler.close()
        # Stopping ends every process this instance started for a run, by the run's label: a
        # cancelled step ends its own children, not a helper of theirs that outlived them.
        ended = await asyncio.to_thread(procs.end_started, grace_s=STOP_GRACE_S)
        if ended:
            log.info("stopped: ended labelled process groups", groups=sorted(ended))


# What a labelled process gets between SIGTERM and SIGKILL when a stopping service ends it.
STOP_GRACE_S = 5.0


def reconciler_for(service: Service, deployment: str, log: Any, *, after_pass: Callable[[], None] | None = None,
                   lost_state: Callable[[], Awaitable[str | None]] | None = None) -> Reconciler:
    """The instance's reconcile, told of every reset the instance sees while it runs; the
    runs it is running itself are never cleaned. `lost_state` tells a fresh Redis from a lost one (history.py)."""
    reconciler = Reconciler(
        service.name, service.consumer.ledger, deployment=deployment,
        settle_s=settle_period_s(service.settings.heartbeat_s),
        keep_runs=lambda: {key.run_id for key in service.consumer.running}, log=log, after_pass=after_pass,
        lost_state=lost_state,
    )
    service.on_reset(reconciler.note_reset)
    return reconciler


def main(argv: list[str] | None = None) -> int:
    problem = startup_problem()  # first: a misspelt SPECDEC_* variable would be ignored
    if problem is not None:
        print(f"services.runtime.main: {problem}", file=sys.stderr)
        return 2
    try:
        failpoints.check_setting()
    except failpoints.FailpointError as exc:
        print(f"services.runtime.main: {exc}", file=sys.stderr)
        return 2
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(
            f"usage: python -m services.runtime.main SERVICE  (one of: {', '.join(apps.available())})", file=sys.stderr
        )
        return 2
    try:
        settings = RuntimeSettings()
    except ValidationError as exc:  # a SPECDEC_* value the settings refuse: one line, not a traceback
        print(f"services.runtime.main: {invalid_input(exc)}", file=sys.stderr)
        return 2
    asyncio.run(run(args[0], settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
