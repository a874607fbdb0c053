"""Delivery semantics around a step handler: one stream entry, validated, leased, handled, finished.

The steps of one message, its error boundary, the lease's heartbeat and the deferred finish inside a
read batch (docs/delivery.md#one-message, docs/delivery.md#read-batches). Invariant: a step key
marked done is never run again, and an entry is acked only once its outputs are published.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol, TypeVar

import structlog
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from contracts.catalogue import step_of
from contracts.events import FAILED
from contracts.registry import ContractError, Registry, UnknownEvent
from services.runtime import failpoints
from services.runtime.bundle.bundle import ArtifactConflict
from services.runtime.delivery.adopt import adopt_step, completes, record_step, with_derived_ids
from services.runtime.delivery.broker import Bus
from services.runtime.delivery.deadletter import dead_letter

# Re-exported (`X as X`): service.py imports GroupKeeper from here, the services Delivery, Route, StepContext and
# StepKeyFn.
from services.runtime.delivery.groups import GroupKeeper as GroupKeeper
from services.runtime.delivery.ledger import BUSY, DONE, RETAKEN, AckRef, Finish, Ledger, StepKey
from services.runtime.delivery.route import (
    Delivered,
    Lease,
    Touch,
    retry_dropped,
)
from services.runtime.delivery.route import (
    Delivery as Delivery,
)
from services.runtime.delivery.route import (
    Route as Route,
)
from services.runtime.delivery.route import (
    StepContext as StepContext,
)
from services.runtime.delivery.route import (
    StepKeyFn as StepKeyFn,
)
from services.runtime.delivery.tally import record_attempt
from services.runtime.errors import SpecdecError, StepFailed, as_step_failure
from services.runtime.resources import Resources
from services.runtime.settings import RuntimeSettings

T = TypeVar("T")


class GiveBack(Protocol):
    """Sets a pending entry's delivery count (service.py's give_back)."""

    def __call__(self, stream: str, group: str, consumer: str, message_id: str, *, count: int) -> Awaitable[None]: ...


# While Redis cannot be reached, the heartbeat retries this often, so that the
# lease is back within a moment of Redis answering again (before a reclaimer,
# polling every SPECDEC_RECLAIM_POLL_MS, finds the message idle).
HEARTBEAT_RETRY_S = 0.1
# Waits between attempts to record a finished step while Redis does not answer (6.3 s in all).
RECORD_RETRIES_S = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2)


class Consumer:
    """Runs one service's routes with the delivery semantics above."""

    def __init__(
        self,
        *,
        service: str,
        settings: RuntimeSettings,
        registry: Registry,
        ledger: Ledger,
        bus: Bus,
        touch: Touch | None = None,
        give_back: GiveBack | None = None,
        resources: Resources | None = None,
        metrics: Any = None,
    ) -> None:
        self.service = service
        self.settings = settings
        self.registry = registry
        self.ledger = ledger
        self.bus = bus
        # touch(stream, group, consumer, message_id) resets a pending message's
        # idle time (XCLAIM JUSTID); None where the transport has no PEL.
        self.touch = touch
        # give_back(stream, group, consumer, message_id, count) sets a pending message's
        # delivery count (XCLAIM RETRYCOUNT); None where the transport has no PEL.
        self.give_back = give_back
        self.resources = resources
        # The run record a step is recorded in, counted in and adopted from; None without one.
        self.bundle = resources.bundle if resources is not None else None
        self.metrics = metrics
        self.log = structlog.get_logger().bind(service=service)
        self.in_flight: set[asyncio.Task[Any]] = set()
        # SPECDEC_MAX_CONCURRENCY per stream (one pool per route, `_slots`).
        self._slot_pools: dict[str, asyncio.Semaphore] = {}
        # Step keys this instance is running now. A delivery of a key that runs
        # here is left pending without asking Redis: after a Redis outage the
        # lease may have lapsed, and this instance's own reclaimer must not
        # start the step a second time beside the running one.
        self.running: set[StepKey] = set()
        # False once the instance is stopping: new deliveries are left pending
        # (unacked) for another instance to reclaim.
        self.accepting = True
        # Finished steps of a read batch whose done mark and ack travel with the next
        # entry's lease (`finish_then_begin`), or with `flush` at the batch's end. The
        # step's outputs are published before one lands here, so a crash before it is
        # written leaves the entry pending, exactly as a crash just before `finish`.
        self._deferred: list[Finish] = []
        # Told when a running step's heartbeat found its lease gone and took it back: Redis
        # lost its leases (services/runtime/delivery/reconcile.py waits before cleaning anything).
        self.on_reset: Callable[[str], None] | None = None

    @property
    def lease_ttl_ms(self) -> int:
        return self.settings.lease_ttl_ms

    async def handle(self, route: Route, delivery: Delivered, *, defer_finish: bool = False) -> None:
        """Handle one delivery. With `defer_finish` (a read batch's entry with another behind
        it) a finished step's done mark and ack are written with the next entry's lease, in
        one round trip; the batch's reader calls `flush` when it ends."""
        if not self.accepting:
            return
        task = asyncio.current_task()
        if task is not None:
            self.in_flight.add(task)
        try:
            async with self._slots(route):
                if not self.accepting:
                    return  # stopped while waiting for a slot: left pending, unacked
                started = time.perf_counter()
                outcome = await self._handle(route, delivery, defer_finish)
        except (RedisConnectionError, RedisTimeoutError) as exc:
            # Redis went away under the delivery's own ledger calls (its lease, its done mark): the
            # entry stays pending and is delivered again once Redis answers; one line, no traceback.
            self.log.warning("Redis went away while handling a delivery; it is handled again once Redis answers",
                             stream=delivery.stream, message_id=delivery.message_id,
                             error=f"{type(exc).__name__}: {exc}")
            return
        finally:
            if task is not None:
                self.in_flight.discard(task)
        if self.metrics is not None:
            self.metrics.observe(route.schema, outcome, time.perf_counter() - started)

    def _slots(self, route: Route) -> asyncio.Semaphore:
        """The stream's handler slots, `max_concurrency` of them, shared by everything that
        starts its handlers: the reader, the reclaimer and the catch-up over the bundle. A
        delivery waits here for a slot before it takes its lease; while it waits it is an
        ordinary pending entry (another instance may reclaim it, and the ledger then decides)."""
        slots = self._slot_pools.get(route.schema)
        if slots is None:
            slots = self._slot_pools[route.schema] = asyncio.Semaphore(self.settings.max_concurrency)
        return slots

    async def flush(self) -> None:
        """Write every deferred finish now (a read batch ended, or stopped early)."""
        while self._deferred:
            done = self._deferred.pop(0)
            await self._recording(partial(self.ledger.finish, done.key, done.owner, done.outputs, done.ack), self.log)

    async def _begin(self, key: StepKey, owner: str, log: Any) -> str:
        """The step key's done-check and lease, carrying a deferred finish when one waits."""
        if not self._deferred:
            return await self.ledger.begin(key, owner, self.lease_ttl_ms)
        done = self._deferred.pop(0)
        try:
            return await self._recording(
                lambda: self.ledger.finish_then_begin(done, key, owner, self.lease_ttl_ms), log
            )
        except BaseException:
            self._deferred.insert(0, done)  # not known to be written: flush() tries again
            raise

    async def _handle(self, route: Route, delivery: Delivered, defer_finish: bool = False) -> str:
        message_ref = f"{self.service}:{delivery.stream}:{delivery.message_id}"
        log = self.log.bind(stream=delivery.stream, message_id=delivery.message_id)
        deliveries = await delivery.delivery_count()
        try:
            event = self.registry.parse(delivery.body)
        except ContractError as exc:
            kind = "unknown" if isinstance(exc, UnknownEvent) else "invalid"
            await dead_letter(self.bus, self.service, delivery, deliveries, kind=kind, reason=str(exc))
            log.warning("dead-lettered", kind=kind, reason=str(exc))
            return "dead_lettered"
        if event.SCHEMA != route.schema:
            reason = f"stream {delivery.stream} carries {route.schema}, not {event.SCHEMA}"
            await dead_letter(self.bus, self.service, delivery, deliveries, kind="invalid", reason=reason, event=event)
            log.warning("dead-lettered", kind="invalid", reason=reason)
            return "dead_lettered"

        log = log.bind(run_id=event.run_id, event_id=event.event_id, schema=event.SCHEMA)
        key = StepKey(self.service, event.run_id, event.SCHEMA, route.step_key(event))
        if key in self.running:
            # Left pending: it is delivered again later, and then finds the step done (or
            # runs it, if the running copy failed). Waiting is not a failed delivery.
            await self._uncount(delivery, deliveries, log)
            log.info("step running in this instance; left pending", step_key=key.step)
            return "deferred"
        # The lease before the delivery count: a delivery that finds its step done or running
        # elsewhere says nothing about whether the step can complete (a duplicate of a long
        # step is delivered again every reclaim idle time while the original runs).
        owner = f"{self.settings.instance}/{delivery.message_id}"
        began = await self._begin(key, owner, log)
        if began == DONE:
            await delivery.ack()
            log.info("duplicate skipped", step_key=key.step)
            return "duplicate"
        if began == BUSY:
            # Another live instance is doing this very step (a duplicate event):
            # leave ours pending, not counted; once that work is done, our redelivery
            # is acked as a duplicate, and if its owner dies, our copy runs it.
            await self._uncount(delivery, deliveries, log)
            log.info("step in flight elsewhere; left pending", step_key=key.step)
            return "deferred"
        # What catch-up delivers from the bundle has no stream entry to count it: it is counted in the
        # run's bundle (tally.py), once the lease is held, before the handler can take the process down.
        marks = self.bundle if route.outputs or route.failure_step else None
        if getattr(delivery, "from_bundle", False) and marks is not None:
            try:
                counted = await asyncio.to_thread(record_attempt, marks, event.run_id, service=self.service,
                                                  schema=event.SCHEMA, step_key=key.step,
                                                  instance=self.settings.instance)
            except BaseException:
                await self._release(key, owner)
                raise
            if counted is None:
                await self._release(key, owner)
                log.info("step dead-lettered; left alone until its dead letter is replayed", step_key=key.step)
                return "deferred"
            deliveries = counted
        if deliveries > self.settings.max_deliveries:
            try:
                error = await self.ledger.last_error(message_ref)
                reason = (
                    f"delivered {deliveries} times (limit {self.settings.max_deliveries}) without completing; "
                    + (f"last error: {error}" if error else "no error recorded: the handling process died or hung")
                )
                await dead_letter(self.bus, self.service, delivery, deliveries, kind="exhausted", reason=reason,
                                  error=error, event=event, step=(marks, key.step))
            finally:
                await self._release(key, owner)
            log.error("dead-lettered", kind="exhausted", deliveries=deliveries)
            return "dead_lettered"

        failpoints.hit("delivery.leased-before-step")
        context = StepContext(
            service=self.service,
            settings=self.settings,
            bus=self.bus,
            log=log,
            resources=self.resources,
            lease=Lease(key=key.render(), owner=owner, ledger=self.ledger),
        )
        self.running.add(key)
        # The heartbeat starts only once the step has run one interval: most steps end
        # sooner, and a timer costs less than a task started and cancelled per message.
        heartbeat: list[asyncio.Task[None]] = []
        beat_timer = asyncio.get_running_loop().call_later(
            self.settings.heartbeat_s,
            lambda: heartbeat.append(asyncio.create_task(self._heartbeat(key, owner, delivery, log))),
        )
        finished = False
        try:
            log.debug("step started", step_key=key.step, delivery=deliveries)
            bundle = self.bundle if route.outputs else None
            adopted = None
            if bundle is not None:
                # The bundle, not Redis's ledger, is the record: a step recorded there (its ledger
                # mark lost with Redis) emits its recorded events again, same IDs, and does not run.
                adopted = await asyncio.to_thread(
                    adopt_step, bundle, self.service, event, key.step, registry=self.registry
                )
                if adopted is not None:
                    log.info("step already recorded in the bundle; re-emitting its events instead of running",
                             step_key=key.step, outputs=[output.SCHEMA for output in adopted])
            try:
                try:
                    if adopted is not None:
                        outputs = adopted
                    else:
                        outputs = list(await route.handler(event, context))
                except ArtifactConflict as exc:
                    # Evidence already written differs from what this run now
                    # produced: a retry cannot fix that, the run halts.
                    raise StepFailed(f"{exc}; start a new run instead", error_type="ArtifactConflict") from None
                except SpecdecError as exc:
                    # The one error boundary (services/runtime/errors.py): a permanent
                    # specdec error ends the step; a transient one is retried below.
                    failure = as_step_failure(exc)
                    if failure is None or failure is exc:
                        raise
                    raise failure from exc
            except StepFailed as exc:
                step = route.failure_step or step_of(event.SCHEMA) or "profile"
                failed = event.caused(
                    FAILED[step], producer=self._producer, step=step, reason=exc.reason, error_type=exc.error_type,
                    artifacts=exc.artifacts,
                )
                outputs = [failed]
                log.warning("step failed", step=step, reason=exc.reason)
            if adopted is None:
                # Derived IDs: a retry's or a re-emission's events are the same events.
                outputs = with_derived_ids(self.service, event, key.step, outputs)
                if bundle is not None and completes(route.outputs, outputs):
                    outputs = await asyncio.to_thread(
                        record_step, bundle, self.service, event, key.step, outputs=outputs
                    )
            for output in outputs:
                await self._recording(partial(self.bus.publish, output), log)
            failpoints.hit("delivery.published-before-ack")
            ack = AckRef(delivery.stream, delivery.group, delivery.message_id) if delivery.group else None
            done = Finish(key, owner, [output.event_id for output in outputs], ack)
            if defer_finish and ack is not None:
                self._deferred.append(done)  # written with the next entry's lease, or by flush()
                acked = True
            else:
                acked = await self._recording(lambda: self.ledger.finish(done.key, owner, done.outputs, ack), log)
            finished = True
            if not acked:
                await delivery.ack()
            log.info("step done", outputs=[output.SCHEMA for output in outputs])
            return "failed_step" if outputs and outputs[0].SCHEMA.endswith(".failed") else "done"
        except asyncio.CancelledError:
            log.warning("step interrupted; left pending for another instance")
            raise
        except Exception as exc:  # noqa: BLE001 - any handler error becomes a retry or a dead letter
            error = f"{type(exc).__name__}: {exc}"
            try:
                await self.ledger.record_error(message_ref, error)
            except (RedisError, OSError):
                # Redis itself is what failed (e.g. the publish above): the message
                # stays pending and is reclaimed once Redis answers again.
                log.warning("step raised and Redis is unreachable; left pending", error=error, delivery=deliveries)
                return "retry"
            if deliveries >= self.settings.max_deliveries:
                reason = f"handler raised on delivery {deliveries} of {self.settings.max_deliveries}"
                await dead_letter(
                    self.bus,
                    self.service,
                    delivery,
                    deliveries,
                    kind="failed",
                    reason=reason,
                    error=error,
                    event=event,
                    step=(marks, key.step),
                )
                log.error("dead-lettered", kind="failed", error=error)
                return "dead_lettered"
            log.warning("step raised; left pending for a retry", error=error, delivery=deliveries)
            return "retry"
        finally:
            beat_timer.cancel()
            for beat in heartbeat:
                beat.cancel()
            self.running.discard(key)
            if not finished:
                await self._release(key, owner)

    async def _release(self, key: StepKey, owner: str) -> None:
        try:
            await asyncio.shield(self.ledger.release(key, owner))
        except (RedisError, OSError):
            pass  # the lease expires on its own (TTL)

    async def _uncount(self, delivery: Delivered, deliveries: int, log: Any) -> None:
        """Give back a delivery that found its step running (here or elsewhere): the entry's
        delivery count is set back (XCLAIM RETRYCOUNT), so however long the original runs,
        waiting never brings its duplicate nearer to `max_deliveries`."""
        if self.give_back is None or not delivery.group:
            return
        try:
            await self.give_back(delivery.stream, delivery.group, delivery.consumer, delivery.message_id,
                                 count=max(0, deliveries - 1))
        except (RedisError, OSError) as exc:
            # The count stays as it is: at worst the duplicate reaches the limit sooner, as before.
            log.warning("cannot give back the delivery of a step that runs elsewhere",
                        error=f"{type(exc).__name__}: {exc}")

    @property
    def _producer(self) -> str:
        return f"{self.service}/{self.settings.instance}"

    async def _recording(self, op: Callable[[], Awaitable[T]], log: Any) -> T:
        """Run one Redis write that records a finished step, retrying a dropped connection.

        The handler's work (side effects included) is done by then: leaving the
        message pending over a connection that died (a Redis restart leaves stale
        pooled connections) would run the step a second time. The heartbeat keeps
        the lease meanwhile. Repeating a write is harmless: an output published twice
        carries one event_id (every consumer keys its step, the journal dedups), and
        `finish` is idempotent. After the last retry the error goes to the caller,
        which leaves the message pending as before.
        """
        return await retry_dropped(
            op, RECORD_RETRIES_S, log, "recording the finished step cannot reach Redis; retrying"
        )

    async def _heartbeat(self, key: StepKey, owner: str, delivery: Delivered, log: Any) -> None:
        """Keep the lease and the message alive while the step runs. A beat that
        cannot reach Redis (restart, failover, network) is retried until it gets
        through: a heartbeat that stopped at the first error would let the lease
        lapse and the message be reclaimed while the step still runs. Started one
        interval after the step began, it beats at once."""
        interval = self.settings.heartbeat_s
        failing = lost = False
        first = True
        while True:
            if not first:
                await asyncio.sleep(min(interval, HEARTBEAT_RETRY_S) if failing else interval)
            first = False
            try:
                held = await self.ledger.renew(key, owner, self.lease_ttl_ms)
                if held == RETAKEN and self.on_reset is not None:
                    self.on_reset(f"the lease of running step {key.render()} had vanished; taken back")
                # Touching claims the message for this consumer: only while this owner holds the lease.
                # A step taken up from the bundle (catchup.py) has no stream entry to touch.
                if held and self.touch is not None and delivery.group:
                    await self.touch(delivery.stream, self.service, delivery.consumer, delivery.message_id)
                # A beat racing the step's own finish finds it done: no other owner is involved.
                finished = not held and await self.ledger.is_done(key)
            except (RedisError, OSError) as exc:
                if not failing:
                    log.warning("heartbeat cannot reach Redis; retrying", error=f"{type(exc).__name__}: {exc}")
                failing = True
                continue
            if failing:
                log.info("heartbeat reaches Redis again", lease_held=held)
            failing = False
            if finished:
                return
            if not held and not lost:
                log.error("lease taken by another owner while this step runs; it may run twice", step_key=key.step)
            lost = not held
