"""Every SPECDEC_* environment variable specdec knows, and the start-up check that refuses any other.

A misspelt variable would be read by nothing and the process would run on the default, silently
(docs/design.md#principle-1-no-inert-configuration); every entry point calls `startup_problem` first
(docs/configuration.md#service-settings-environment-prefix-specdec_).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping

PREFIX = "SPECDEC_"

# RuntimeSettings (services/runtime/settings.py), every service's and the CLI's settings; named here, not
# imported, so that the health check stays stdlib only (it starts fast). tests/unit/guard/test_environment.py
# checks that every settings class's fields are here.
_RUNTIME_SETTINGS = {
    "SPECDEC_REDIS_URL": "Redis URL (the services' ACL user)",
    "SPECDEC_REDIS_URL_FILE": "file holding the Redis URL, replacing SPECDEC_REDIS_URL (a mounted secret)",
    "SPECDEC_OPERATOR_REDIS_URL": "Redis URL of the operator's ACL user, which alone may write the approval stream",
    "SPECDEC_STREAM_PREFIX": "prefix of every stream and key",
    "SPECDEC_BUNDLE_ROOT": "root folder of the evidence bundles",
    "SPECDEC_INSTANCE": "consumer name of this instance in its group",
    "SPECDEC_MAX_DELIVERIES": "deliveries after which a message is dead-lettered",
    "SPECDEC_RECLAIM_IDLE_MS": "idle time after which a pending message is reclaimed",
    "SPECDEC_RECLAIM_POLL_MS": "how often an instance looks for reclaimable work",
    "SPECDEC_READ_BLOCK_MS": "XREADGROUP block time of an idle reader",
    "SPECDEC_MAX_CONCURRENCY": "messages one instance handles at once per stream",
    "SPECDEC_SHUTDOWN_GRACE_S": "how long in-flight work may finish on SIGTERM",
    "SPECDEC_STREAM_RETENTION_S": "the journal: how long an entry every group has acked stays on its stream",
    "SPECDEC_LOG_LEVEL": "log level",
    "SPECDEC_HEALTH_PORT": "port of the /health and /metrics endpoint",
    "SPECDEC_PUBLISH_TOKEN_ENV": "the publisher: name of the variable holding an https:// lake's bearer token",
    "SPECDEC_PUBLISH_TOKEN_FILE": "the publisher: file holding that token",
    "SPECDEC_PUBLISH_ALLOWED_TARGETS": "the publisher: URL prefixes of the https:// targets a publish may go to",
    "SPECDEC_PUBLISH_CA_BUNDLE": "the publisher: CA certificates an https:// lake is verified against",
}

# The settings class of the MCP server (services/mcp/auth.py McpSettings).
_MCP_SETTINGS = {
    "SPECDEC_MCP_TOKEN_ENV": "McpSettings (services/mcp/auth.py): name of the variable holding the MCP bearer token",
    "SPECDEC_MCP_TOKEN_FILE": "McpSettings (services/mcp/auth.py): file holding the MCP bearer token",
    "SPECDEC_MCP_ROOTS": "McpSettings (services/mcp/auth.py): folders the MCP tools read campaign, matrix and traffic "
    "files from",
}

# Fault injection (services/runtime/failpoints.py): off unless set; the failpoint suite sets it on one service.
_FAULTS = {
    "SPECDEC_FAILPOINTS": "services/runtime/failpoints.py: NAME=kill[@N],... SIGKILLs the process at a named "
    "durable boundary, once (tests only)",
}

# Set by specdec on the processes it starts (services/runtime/processes/procs.py): labels, read back by cleanup.
_CHILDREN = {
    "SPECDEC_EXPERIMENT": "set on every process a step starts: the run it belongs to (cleanup selects by it)",
    "SPECDEC_SERVICE": "set on every process a step starts: the service that started it (reconcile selects by it)",
    "SPECDEC_DEPLOYMENT": "set by a deployment on itself and its children: which deployment they belong to",
}

# Read by the scripts and test harnesses in infra/bin, compose.yaml and tests/.
_SCRIPTS = {
    "SPECDEC_REDIS_PORT": "compose.yaml: host port the compose topology's Redis is published on",
    "SPECDEC_LOCAL_REDIS_PORT": "infra/bin/ensure-redis: port of the redis-server it starts when none answers",
    "SPECDEC_CHROMIUM": "infra/bin/ensure-chromium: the Chromium binary the report's figures are rendered with",
    "SPECDEC_SLURM_STATE": "infra/bin/ensure-slurm: state folder of the local Slurm cluster",
    "SPECDEC_SLURM_GRES_COUNT": "infra/bin/ensure-slurm: GPUs the local Slurm node declares",
    "SPECDEC_SLURMCTLD_PORT": "infra/bin/ensure-slurm: slurmctld's port",
    "SPECDEC_SLURMD_PORT": "infra/bin/ensure-slurm: slurmd's port",
    "SPECDEC_SPECULATORS_VENV": "infra/bin/ensure-speculators-env: folder of the EAGLE-3 trainer's environment",
    "SPECDEC_WHEEL_CACHE": "infra/bin/build-arctic-inference: folder the built wheel is kept in",
    "SPECDEC_TEST_LOGS": "infra/bin/run-tests: folder the test run's logs are kept in",
    "SPECDEC_COMPOSE_RUN": "infra/bin/test-compose, tests/compose: the compose test run's ID",
    "SPECDEC_COMPOSE_IMAGE": "infra/bin/test-compose, tests/compose: the specdec image under test",
    "SPECDEC_COMPOSE_REDIS_IMAGE": "infra/bin/test-compose, tests/compose: the Redis image under test",
    "SPECDEC_COMPOSE_WORK": "infra/bin/test-compose, tests/compose: the compose test's work folder",
    "SPECDEC_COMPOSE_REDIS_DOWN_S": "tests/compose: how long the Redis outage test keeps Redis down",
}

KNOWN: dict[str, str] = {
    **{name: f"RuntimeSettings (services/runtime/settings.py): {what}" for name, what in _RUNTIME_SETTINGS.items()},
    **_MCP_SETTINGS,
    **_CHILDREN,
    **_FAULTS,
    **_SCRIPTS,
}
"""Every SPECDEC_* variable specdec knows -> who reads or sets it."""

# Settings whose value is the name of another variable (a token's), which is then known too.
TOKEN_ENV_SETTINGS = ("SPECDEC_PUBLISH_TOKEN_ENV", "SPECDEC_MCP_TOKEN_ENV")


def known(environ: Mapping[str, str]) -> set[str]:
    """The registry plus the variables this environment's *_TOKEN_ENV settings name."""
    return set(KNOWN) | {environ[name] for name in TOKEN_ENV_SETTINGS if environ.get(name)}


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    environ = os.environ if environ is None else environ
    names = known(environ)
    return sorted(name for name in environ if name.startswith(PREFIX) and name not in names)


def startup_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """One line naming each unknown SPECDEC_* variable and the nearest known name, or None."""
    unknown = unknown_variables(environ)
    if not unknown:
        return None
    parts = []
    for name in unknown:
        # Compared without the prefix every name shares, which would make any two names look alike.
        near = difflib.get_close_matches(name.removeprefix(PREFIX), [k.removeprefix(PREFIX) for k in sorted(KNOWN)],
                                         n=1, cutoff=0.6)
        parts.append(f"{name} (did you mean {PREFIX}{near[0]}?)" if near else f"{name} (no known name is close)")
    return (f"unknown environment variable{'s' if len(unknown) > 1 else ''} {', '.join(parts)}: nothing reads "
            f"{'them' if len(unknown) > 1 else 'it'}; correct the name or unset it (known: docs/configuration.md, "
            "services/runtime/environment.py)")
