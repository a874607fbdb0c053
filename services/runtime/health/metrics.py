"""Prometheus metrics of one service instance, in a registry of its own.

The consumer (services/runtime/delivery/consumer.py) calls `Metrics.observe` after each
delivery; the health endpoint (services/runtime/health/health.py) serves `render()` as
`GET /metrics` and refreshes the group gauges from Redis right before.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from pydantic import Field

from contracts.envelope import Strict

# The outcomes `Consumer._handle` returns (services/runtime/delivery/consumer.py).
OUTCOMES = frozenset({"done", "failed_step", "duplicate", "deferred", "retry", "dead_lettered"})
# Outcomes that took the message off the group as processed (acked).
CONSUMED = frozenset({"done", "failed_step", "duplicate"})
# Outcomes for which the step's handler ran: the ones the latency histogram times.
HANDLER_RAN = frozenset({"done", "failed_step", "retry"})
# Steps last from milliseconds (gate, duplicates) to hours (training, serving).
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400)

class GroupState(Strict):
    """This service's consumer group on one stream, as XINFO GROUPS reports it."""

    stream: str = Field(description="Stream name (<prefix>.<schema>).")
    group: str = Field(description="Consumer group (the service's name).")
    lag: int | None = Field(description="Entries not yet delivered to the group; null when Redis cannot tell.")
    pending: int | None = Field(description="Entries delivered but not acked (the group's PEL); null when unread.")
    consumers: int | None = Field(description="Consumers (readers and reclaimers) in the group; null when unread.")
    oldest_waiting_age_s: float | None = Field(
        default=None,
        description="Age (from its entry ID's time) of the oldest entry waiting for this group: not yet delivered, "
        "or pending with nobody working on it (idle past SPECDEC_RECLAIM_IDLE_MS); 0 when none waits, null when "
        "unread.")
    error: str | None = Field(default=None, description="Why the state could not be read, when it could not.")


class _GroupCollector:
    """Scrape-time gauges from the latest XINFO GROUPS snapshot.

    The endpoint refreshes `states` right before each scrape; a stream whose
    state could not be read has no sample (absent, never a stale value).
    """

    def __init__(self, service: str) -> None:
        self.service = service
        self.states: list[GroupState] = []
        self.redis_up: bool | None = None
        # XLEN of the deployment's dead-letter stream at the last scrape; None when unread.
        self.deadletter_entries: int | None = None

    def collect(self) -> Iterable[Metric]:
        pending = GaugeMetricFamily(
            "specdec_group_pending", "Entries delivered to the group but not acked.", labels=["service", "stream"]
        )
        lag = GaugeMetricFamily(
            "specdec_group_lag", "Entries of the stream not yet delivered to the group.", labels=["service", "stream"]
        )
        waiting = GaugeMetricFamily(
            "specdec_oldest_waiting_step_age_seconds",
            "Age of the oldest step waiting for this service: an entry not yet delivered to its group, or pending "
            "with nobody working on it; 0 when none waits.", labels=["service", "stream"],
        )
        for state in self.states:
            if state.pending is not None:
                pending.add_metric([self.service, state.stream], state.pending)
            if state.lag is not None:
                lag.add_metric([self.service, state.stream], state.lag)
            if state.oldest_waiting_age_s is not None:
                waiting.add_metric([self.service, state.stream], state.oldest_waiting_age_s)
        up = GaugeMetricFamily("specdec_redis_up", "1 when Redis answered at the last scrape.", labels=["service"])
        if self.redis_up is not None:
            up.add_metric([self.service], 1.0 if self.redis_up else 0.0)
        dead = GaugeMetricFamily(
            "specdec_deadletter_entries", "Entries of the deployment's dead-letter stream (XLEN).", labels=["service"]
        )
        if self.deadletter_entries is not None:
            dead.add_metric([self.service], self.deadletter_entries)
        return [pending, lag, waiting, up, dead]


class Metrics:
    """Counters and the latency histogram of one instance, in a registry of its own.

    `observe(schema, outcome, seconds)` is called by the consumer after each
    delivery. Counting rules (docs/deployment.md, "Health and metrics"):
    consumed = done, failed_step, duplicate (acked as processed);
    failed = failed_step (kind="step": the step emitted `<step>.failed`) and
    retry (kind="error": the handler raised, the message stays pending);
    dead_lettered = dead_lettered; the histogram times deliveries whose handler
    ran (done, failed_step, retry). Every delivery is also counted by outcome.
    """

    def __init__(self, service: str, registry: CollectorRegistry | None = None) -> None:
        self.service = service
        self.registry = registry or CollectorRegistry()
        labels = ["service", "schema"]
        self.consumed = Counter(
            "specdec_events_consumed", "Events handled and acked as processed.", labels, registry=self.registry
        )
        self.failed = Counter(
            "specdec_events_failed",
            "Deliveries whose step failed (kind=step) or whose handler raised (kind=error).",
            [*labels, "kind"],
            registry=self.registry,
        )
        self.dead_lettered = Counter(
            "specdec_events_dead_lettered", "Events moved to the dead-letter stream.", labels, registry=self.registry
        )
        self.handled = Counter(
            "specdec_deliveries", "Every delivery, by outcome.", [*labels, "outcome"], registry=self.registry
        )
        self.handler_seconds = Histogram(
            "specdec_handler_seconds",
            "Time to handle one delivery whose step handler ran.",
            labels,
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.groups = _GroupCollector(service)
        self.registry.register(self.groups)

    def observe(self, schema: str, outcome: str, seconds: float) -> None:
        # An outcome this module does not know is still counted, under a bounded
        # label, so a new consumer outcome shows up instead of vanishing.
        label = outcome if outcome in OUTCOMES else "unknown"
        self.handled.labels(self.service, schema, label).inc()
        if label in CONSUMED:
            self.consumed.labels(self.service, schema).inc()
        if label == "failed_step":
            self.failed.labels(self.service, schema, "step").inc()
        elif label == "retry":
            self.failed.labels(self.service, schema, "error").inc()
        elif label == "dead_lettered":
            self.dead_lettered.labels(self.service, schema).inc()
        if label in HANDLER_RAN:
            self.handler_seconds.labels(self.service, schema).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
