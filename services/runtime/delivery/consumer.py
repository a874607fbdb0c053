"""Delivery semantics around a step handler (DESIGN.md, "Delivery semantics").

For each message of a route:
1. parse and validate; an invalid payload or unknown version is dead-lettered at once;
2. skip (and ack) a step key that is already done: duplicates never repeat side effects;
3. dead-letter a message delivered more than `max_deliveries` times;
4. take the step key's in-flight lease (with the done-check of 2, one script); keep
   it and the message alive with a heartbeat (XCLAIM ... JUSTID by the same
   consumer) while the handler runs;
5. on success publish the outputs, then mark the key done and ack in one script
   (at-least-once: a crash before it redelivers, and idempotent side effects make
   the retry harmless); on `StepFailed` publish `<step>.failed`. Inside a read
   batch that script is sent together with the next entry's lease of 4, in one
   round trip (the "deferred finish", `handle(defer_finish=True)` and `flush`);
   on any other error record it and leave the message pending for a retry
   (reclaimed after `reclaim_idle_ms`), dead-lettering it on its last delivery.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from contracts.catalogue import step_of
from contracts.deadletter import DeadLetter
from contracts.envelope import Event
from contracts.events import FAILED
from contracts.registry import ContractError, Registry, UnknownEvent
from services.runtime.delivery.adopt import adopt_step, completes, record_step, with_derived_ids
from services.runtime.delivery.broker import Bus
from services.runtime.bundle.bundle import ArtifactConflict
from services.runtime.errors import SpecdecError, StepFailed, as_step_failure
from services.runtime.delivery.ledger import BUSY, DONE, RETAKEN, AckRef, Finish, Ledger, StepKey
from services.runtime.settings import RuntimeSettings

if TYPE_CHECKING:
    import redis.asyncio as aioredis


# A read loop's backoff while Redis does not answer: 0.1 s doubling to 2 s.
READ_RETRY_S = 0.1
READ_RETRY_MAX_S = 2.0
# A dropped connection within this many seconds of Redis answering again is a stale pooled one.
STALE_WINDOW_S = 5.0
# Groups recreated within this many seconds of the last one went with the same reset: not warned again.
RECOVERY_QUIET_S = 30.0
# Waits between attempts of a progress event over a dropped connection: ~62 s in all.
EMIT_RETRIES_S = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0)


async def retry_dropped(op: Callable[[], Awaitable[Any]], waits: Sequence[float], log: Any, message: str,
                        **fields: Any) -> Any:
    """Run `op`, retrying a dropped Redis connection after each of `waits`; the last error goes to the caller."""
    for wait_s in (*waits, None):
        try:
            return await op()
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            if wait_s is None:
                raise
            log.warning(message, error=f"{type(exc).__name__}: {exc}", retry_in_s=wait_s, **fields)
            await asyncio.sleep(wait_s)
    raise AssertionError("unreachable")  # the loop returns or raises


def group_lost(exc: BaseException) -> bool:
    """Whether a read's error says the consumer group may be gone: NOGROUP (no group, or no
    stream at all), or UNBLOCKED (Redis 7's answer to an XREADGROUP blocked on a stream that
    was deleted meanwhile, e.g. by FLUSHALL)."""
    return isinstance(exc, ResponseError) and str(exc).startswith(("NOGROUP", "UNBLOCKED"))


class GroupKeeper:
    """Creates a service's consumer group on each stream it reads, and creates it again when it vanished.

    Redis is the transport, not the record (DESIGN.md): it may restart empty, fail
    over to a replica that lagged, or be flushed, and a stream deleted meanwhile is
    recreated, without its group, by the next publish. Every read of the group then
    fails with NOGROUP and nothing is consumed again until the group is back. The
    group is recreated at ID 0, so the entries the new stream already holds are read.
    """

    def __init__(self, client: aioredis.Redis, group: str, log: Any) -> None:
        self.client = client
        self.group = group
        self.log = log
        # Told when a group had to be recreated: Redis lost its state, and with it every
        # lease (services/runtime/delivery/reconcile.py waits before cleaning anything).
        self.on_reset: Callable[[str], None] | None = None
        # A dropped connection: when it was first seen (None while Redis answers) and each
        # stream's next wait. One line when Redis goes and one when it is back, for all of
        # this instance's read loops together (faststream alone logs a traceback per fetch).
        self.lost_since: float | None = None
        self._recovered_at: float | None = None  # when a group was last recreated
        self._back_at: float | None = None  # when Redis last answered again after an outage
        self._waits: dict[str, float] = {}

    async def ensure(self, stream: str) -> bool:
        """XGROUP CREATE <stream> <group> 0 MKSTREAM; False when the group is already there."""
        try:
            await self.client.xgroup_create(stream, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
            return False
        return True

    async def recover(self, stream: str, error: ResponseError) -> None:
        """Recreate the group after a read found it gone. One warning per loss: the
        stream's other subscribers (and other instances) that hit the same NOGROUP
        find the group already recreated (BUSYGROUP) and go on reading silently."""
        if await self.ensure(stream):
            # One warning per reset: the service's other streams, whose groups went with the
            # same reset, follow within seconds and are logged at debug level.
            now = time.monotonic()
            quiet = self._recovered_at is not None and now - self._recovered_at < RECOVERY_QUIET_S
            self._recovered_at = now
            (self.log.debug if quiet else self.log.warning)(
                "consumer group vanished (Redis restarted empty, failed over or was flushed, or the stream was "
                "recreated); recreated it, reading the stream from its start (and each other stream's group "
                "that went with it)",
                stream=stream, group=self.group, error=str(error),
            )
            if self.on_reset is not None:
                self.on_reset(f"consumer group {self.group} on {stream} vanished")

    def guard(self, read: Callable[..., Awaitable[Any]], stream: str) -> Callable[..., Awaitable[Any]]:
        """`read` (one fetch of a subscriber's read loop), recreating the group when it is gone.

        The fetch then returns nothing and the loop reads again, now from the recreated
        group. Any other error goes on to the loop as before (a dropped connection is
        logged and retried there).
        """

        async def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                got = await read(*args, **kwargs)
            except ResponseError as exc:
                if not group_lost(exc):
                    raise
                await self.answered()
                await self.recover(stream, exc)
                return None
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                await self.dropped(stream, exc)
                return None
            await self.answered()
            self._waits.pop(stream, None)
            return got

        return guarded

    async def dropped(self, stream: str, exc: BaseException) -> None:
        """A read found Redis gone: say so once (for every read loop of the instance), then wait
        this stream's backoff (READ_RETRY_S doubling to READ_RETRY_MAX_S) before the loop reads again."""
        now = time.monotonic()
        if self.lost_since is None and self._back_at is not None and now - self._back_at < STALE_WINDOW_S:
            # Right after Redis came back, a pooled connection opened before the outage fails once
            # on its first use: the next read opens a new one. Not a new outage.
            await asyncio.sleep(READ_RETRY_S)
            return
        if self.lost_since is None:
            self.lost_since = now
            self.log.warning("lost Redis; every read retries with backoff until it answers",
                             error=f"{type(exc).__name__}: {exc}", max_wait_s=READ_RETRY_MAX_S)
        wait_s = self._waits.get(stream, READ_RETRY_S)
        self._waits[stream] = min(wait_s * 2, READ_RETRY_MAX_S)
        await asyncio.sleep(wait_s)

    async def answered(self) -> None:
        """A read returned: once Redis answers a PING too (a fetch may return without asking Redis,
        a reclaimer between its polls), the line that says it is back, once per outage."""
        if self.lost_since is None:
            return
        try:
            await self.client.ping()
        except (RedisConnectionError, RedisTimeoutError, OSError):
            return
        if self.lost_since is not None:
            self.log.warning("Redis answers again; reading on", after_s=round(time.monotonic() - self.lost_since, 1))
            self.lost_since = None
            self._back_at = time.monotonic()


@dataclass
class StepContext:
    """What a handler may use besides its event: publish progress, the lease, the log."""

    service: str
    settings: RuntimeSettings
    bus: Bus
    log: Any
    # Set by the runtime: extra resources a service's bootstrap attached (bundle store, ...).
    resources: dict[str, Any] = field(default_factory=dict)

    async def emit(self, event: Event) -> None:
        """Publish a progress event now (training.started, bench.trial.completed, ...).

        A dropped connection (a Redis restart) is retried for about a minute before
        the error reaches the handler: the step's work behind the event is done and
        recorded by then (a trial's result file), and a step retried later adopts
        that work without announcing it again, so an emit that gave up at once
        would lose the event. The heartbeat keeps the lease meanwhile. A repeated
        publish carries the same event_id (the journal and every consumer dedup it).
        """
        await retry_dropped(lambda: self.bus.publish(event), EMIT_RETRIES_S, self.log,
                            "a progress event cannot reach Redis; retrying", schema=event.SCHEMA, event_id=event.event_id)


Handler = Callable[[Event, StepContext], Awaitable[Sequence[Event]]]
StepKeyFn = Callable[[Event], str]


@dataclass(frozen=True)
class Route:
    """One consumed stream: its schema, the handler, and how to name the step key."""

    schema: str
    handler: Handler
    # The step key a handler is idempotent on; the default is one step per
    # (run, schema) for this service.
    step_key: StepKeyFn = lambda event: "step"
    # The step whose `<step>.failed` a StepFailed becomes; default: the schema's step.
    failure_step: str | None = None
    # The schemas that complete this step (services/runtime/delivery/adopt.py): when set, and the service has
    # a bundle, a completed step is recorded in it before its outputs are published, and a delivery
    # whose ledger lost the step (Redis restarted empty) re-emits the recorded events instead of
    # running. Empty: the ledger alone decides (the journal, whose step is one append).
    outputs: tuple[str, ...] = ()


class Delivery:
    """The transport-side view of one delivered message (faststream or a test double)."""

    def __init__(self, message: Any, *, stream: str, consumer: str, group: str = "", fresh: bool = False) -> None:
        self.message = message
        self.stream = stream
        self.consumer = consumer
        self.group = group
        # A fresh read (XREADGROUP >) is by definition the first delivery:
        # no XPENDING round trip is needed to know its count.
        self.fresh = fresh

    @property
    def message_id(self) -> str:
        ids = self.message.raw_message.get("message_ids") or [b"0-0"]
        first = ids[0]
        return first.decode() if isinstance(first, bytes) else str(first)

    @property
    def body(self) -> bytes:
        return self.message.body

    async def delivery_count(self) -> int:
        if self.fresh:
            return 1
        return await self.message.get_delivery_count()

    async def ack(self) -> None:
        await self.message.ack()


Touch = Callable[[str, str, str, str], Awaitable[None]]

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
        resources: dict[str, Any] | None = None,
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
        self.resources = resources or {}
        self.metrics = metrics
        self.log = structlog.get_logger().bind(service=service)
        self.in_flight: set[asyncio.Task[Any]] = set()
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
        # Shorter than the reclaim idle time: a dead owner's lease is gone
        # before its message can be reclaimed (see services/runtime/delivery/ledger.py).
        return max(1, self.settings.reclaim_idle_ms * 2 // 3)

    async def handle(self, route: Route, delivery: Delivery, *, defer_finish: bool = False) -> None:
        """Handle one delivery. With `defer_finish` (a read batch's entry with another behind
        it) a finished step's done mark and ack are written with the next entry's lease, in
        one round trip; the batch's reader calls `flush` when it ends."""
        if not self.accepting:
            return
        started = time.perf_counter()
        task = asyncio.current_task()
        if task is not None:
            self.in_flight.add(task)
        try:
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

    async def flush(self) -> None:
        """Write every deferred finish now (a read batch ended, or stopped early)."""
        while self._deferred:
            done = self._deferred.pop(0)
            await self._recording(lambda done=done: self.ledger.finish(done.key, done.owner, done.outputs, done.ack),
                                  self.log)

    async def _begin(self, key: StepKey, owner: str, log: Any) -> str:
        """The step key's done-check and lease, carrying a deferred finish when one waits."""
        if not self._deferred:
            return await self.ledger.begin(key, owner, self.lease_ttl_ms)
        done = self._deferred.pop(0)
        try:
            return await self._recording(lambda: self.ledger.finish_then_begin(done, key, owner, self.lease_ttl_ms), log)
        except BaseException:
            self._deferred.insert(0, done)  # not known to be written: flush() tries again
            raise

    async def _handle(self, route: Route, delivery: Delivery, defer_finish: bool = False) -> str:
        message_ref = f"{self.service}:{delivery.stream}:{delivery.message_id}"
        log = self.log.bind(stream=delivery.stream, message_id=delivery.message_id)
        deliveries = await delivery.delivery_count()
        try:
            event = self.registry.parse(delivery.body)
        except ContractError as exc:
            kind = "unknown" if isinstance(exc, UnknownEvent) else "invalid"
            await self._dead_letter(delivery, deliveries, kind=kind, reason=str(exc))
            log.warning("dead-lettered", kind=kind, reason=str(exc))
            return "dead_lettered"
        if event.SCHEMA != route.schema:
            reason = f"stream {delivery.stream} carries {route.schema}, not {event.SCHEMA}"
            await self._dead_letter(delivery, deliveries, kind="invalid", reason=reason, event=event)
            log.warning("dead-lettered", kind="invalid", reason=reason)
            return "dead_lettered"

        log = log.bind(run_id=event.run_id, event_id=event.event_id, schema=event.SCHEMA)
        key = StepKey(self.service, event.run_id, event.SCHEMA, route.step_key(event))
        if key in self.running:
            # Left pending: it is delivered again later, and then finds the step done (or
            # runs it, if the running copy failed).
            log.info("step running in this instance; left pending", step_key=key.step)
            return "deferred"
        if deliveries > self.settings.max_deliveries and not await self.ledger.is_done(key):
            error = await self.ledger.last_error(message_ref)
            reason = (
                f"delivered {deliveries} times (limit {self.settings.max_deliveries}) without completing; "
                + (f"last error: {error}" if error else "no error recorded: the handling process died or hung")
            )
            await self._dead_letter(delivery, deliveries, kind="exhausted", reason=reason, error=error, event=event)
            log.error("dead-lettered", kind="exhausted", deliveries=deliveries)
            return "dead_lettered"
        owner = f"{self.settings.instance}/{delivery.message_id}"
        began = await self._begin(key, owner, log)
        if began == DONE:
            await delivery.ack()
            log.info("duplicate skipped", step_key=key.step)
            return "duplicate"
        if began == BUSY:
            # Another live instance is doing this very step (a duplicate event):
            # leave ours pending; once that work is done, our redelivery is acked
            # as a duplicate, and if its owner dies, our copy runs it.
            log.info("step in flight elsewhere; left pending", step_key=key.step)
            return "deferred"

        context = StepContext(service=self.service, settings=self.settings, bus=self.bus, log=log, resources=self.resources)
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
            bundle = self.resources.get("bundle") if route.outputs else None
            adopted = None
            if bundle is not None:
                # The bundle, not Redis's ledger, is the record: a step recorded there (its ledger
                # mark lost with Redis) emits its recorded events again, same IDs, and does not run.
                adopted = await asyncio.to_thread(adopt_step, bundle, self.service, event, key.step, self.registry)
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
                    outputs = await asyncio.to_thread(record_step, bundle, self.service, event, key.step, outputs)
            for output in outputs:
                await self._recording(lambda output=output: self.bus.publish(output), log)
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
                await self._dead_letter(delivery, deliveries, kind="failed", reason=reason, error=error, event=event)
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
                try:
                    await asyncio.shield(self.ledger.release(key, owner))
                except (RedisError, OSError):
                    pass  # the lease expires on its own (TTL)

    @property
    def _producer(self) -> str:
        return f"{self.service}/{self.settings.instance}"

    async def _recording(self, op: Callable[[], Awaitable[Any]], log: Any) -> Any:
        """Run one Redis write that records a finished step, retrying a dropped connection.

        The handler's work (side effects included) is done by then: leaving the
        message pending over a connection that died (a Redis restart leaves stale
        pooled connections) would run the step a second time. The heartbeat keeps
        the lease meanwhile. Repeating a write is harmless: an output published twice
        carries one event_id (every consumer keys its step, the journal dedups), and
        `finish` is idempotent. After the last retry the error goes to the caller,
        which leaves the message pending as before.
        """
        return await retry_dropped(op, RECORD_RETRIES_S, log, "recording the finished step cannot reach Redis; retrying")

    async def _heartbeat(self, key: StepKey, owner: str, delivery: Delivery, log: Any) -> None:
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

    async def _dead_letter(
        self,
        delivery: Delivery,
        deliveries: int,
        *,
        kind: str,
        reason: str,
        error: str | None = None,
        event: Event | None = None,
    ) -> None:
        record = DeadLetter(
            kind=kind,
            reason=reason,
            error=error,
            service=self.service,
            consumer=delivery.consumer,
            stream=delivery.stream,
            message_id=delivery.message_id,
            delivery_count=deliveries,
            run_id=event.run_id if event else None,
            event_schema=event.SCHEMA if event else None,
            payload=delivery.body.decode("utf-8", errors="replace"),
        )
        headers = {"schema": "deadletter", "run_id": record.run_id or "", "content-type": "application/json"}
        await self.bus.publish_raw(
            self.bus.deadletter, record.model_dump_json(by_alias=True).encode(), headers, record.dead_letter_id
        )
        # Ack only after the dead letter is durable: it now holds the payload.
        await delivery.ack()
