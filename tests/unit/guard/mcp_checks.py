"""One check per argument of every MCP tool and per McpSettings field: the call with and without the
change, and what the server then does.

A tool's observable is the calls it makes into the use cases (services/app, recorded with their
arguments, as cli_checks.py records the CLI's), the session's Redis reads and writes, and whether the
call was refused; the use cases' own behaviour is the CLI guard's and their tests' business. A check
is `(base arguments, changed arguments)` of one tool; the changed ones differ from the base in the
named argument only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import re
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from mcp import Client
from pydantic import BaseModel

from services.app.campaign.roots import FileRoots, OutsideRoots
from services.mcp.auth import Guard, McpSettings, load_token
from services.mcp.deps import Deps
from services.mcp.server import build_server
from services.runtime.bundle.bundle import BundleStore
from services.runtime.settings import RuntimeSettings

RUN, OTHER = "guard-run", "other-run"
HASH, OTHER_HASH = "a" * 64, "b" * 64

# The arguments every call of a tool carries (its required ones); a check changes one of them or adds one.
BASE: dict[str, dict[str, Any]] = {
    "evidence_init": {"family": "toy-llama"},
    "campaign_init": {"config": "a.yaml", "experiment_id": RUN, "family": "toy-llama"},
    "campaign_validate": {"config": "a.yaml"},
    "campaign_run": {"run_id": RUN},
    "campaign_status": {"run_id": RUN},
    "plan_show": {"run_id": RUN, "step": "bench"},
    "approve": {"run_id": RUN, "i_understand_this_mutates_cluster": True},
    "gate": {"run_id": RUN},
    "report_render": {"run_id": RUN},
    "publish_to_lake": {"run_id": RUN},
    "perf_tune_report_campaign_init": {"args": ["--config", "a.yaml", "--experiment-id", RUN, "--family", "toy-llama"]},
    "perf_tune_report_campaign_run": {"args": ["--config", "a.yaml", "--campaign", RUN]},
    "perf_tune_report_publish_to_lake": {"args": ["--campaign", RUN]},
}

# `mcp <tool>.<argument>` -> the value the changed call gives it (beside the base, or instead of it).
CHANGES: dict[str, Any] = {
    "evidence_init.family": "llama-3",
    "evidence_init.experiment_id": OTHER,
    "campaign_init.config": "b.yaml",
    "campaign_init.experiment_id": OTHER,
    "campaign_init.family": "llama-3",
    "campaign_init.evidence_bundle": "/bundles/guard-run",
    "campaign_validate.config": "b.yaml",
    "campaign_run.run_id": OTHER,
    "campaign_run.i_understand_this_mutates_cluster": True,
    "campaign_run.plan_sha256s": [HASH],
    "campaign_run.wait_for_plans_s": 5.0,
    "campaign_status.run_id": OTHER,
    "plan_show.run_id": OTHER,
    "plan_show.step": "training",
    "approve.run_id": OTHER,
    "approve.i_understand_this_mutates_cluster": False,
    "approve.plan_sha256s": [OTHER_HASH],
    "gate.run_id": OTHER,
    "gate.spec": {"objective": "ttft", "acceptance_floor": 0.3},
    "report_render.run_id": OTHER,
    "publish_to_lake.run_id": OTHER,
    "publish_to_lake.target": "file:///tmp/lake",
    "publish_to_lake.i_understand_this_publishes_externally": True,
    "publish_to_lake.draft_override": {"reason": "a reviewed exploratory run"},
    "evidence_init.args": ["--family", "toy-llama", "--intent", "does ngram pay"],
    "perf_tune_report_campaign_init.args": ["--config", "b.yaml", "--experiment-id", RUN, "--family", "toy-llama"],
    "perf_tune_report_campaign_run.args": ["--config", "a.yaml", "--campaign", RUN, "--dry-run"],
    "perf_tune_report_campaign_run.i_understand_this_mutates_cluster": True,
    "perf_tune_report_publish_to_lake.args": ["--campaign", OTHER],
    "perf_tune_report_publish_to_lake.i_understand_this_publishes_externally": True,
}

# The use cases the tools call, by the name the tools reach them through.
_USE_CASES = [
    "services.app.workflow.workflow.evidence_init",
    "services.app.workflow.workflow.campaign_init",
    "services.app.workflow.workflow.campaign_run",
    "services.mcp.tools.validate",
    "services.app.runs.ops.status",
    "services.app.runs.ops.approve",
    "services.app.runs.ops.approve_plans",
    "services.app.runs.plans.show_plan",
    "services.app.runs.gate.decide_run",
    "services.app.runs.report.render",
    "services.app.runs.report.publish",
    "services.app.workflow.verb_calls.evidence_init",
    "services.app.workflow.verb_calls.campaign_init",
    "services.app.workflow.verb_calls.campaign_run",
    "services.app.workflow.verb_calls.publish",
]


def checks() -> dict[str, tuple[str, dict[str, Any], dict[str, Any]]]:
    """`mcp <tool>.<argument>` -> (tool, base arguments, changed arguments)."""
    found = {}
    for key, value in CHANGES.items():
        tool, argument = key.split(".", 1)
        found[f"mcp {key}"] = (tool, dict(BASE[tool]), {**BASE[tool], argument: value})
    return found


def _plain(value: Any) -> Any:
    if isinstance(value, argparse.Namespace):  # a workflow verb's parsed args
        return _plain(vars(value))
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(mode="json"))
    if isinstance(value, (str, int, float, bool, type(None), Path)):
        return value
    return type(value).__name__  # a session, a bundle store: the same in every call


class _Client:
    """The session's Redis client: reads and writes recorded, kept in a dict."""

    def __init__(self, calls: list[Any]) -> None:
        self.calls: list[Any] = calls
        self.data: dict[str, Any] = {}

    async def get(self, key: str) -> Any:
        self.calls.append(("redis.get", key))
        return self.data.get(key)

    async def set(self, key: str, value: Any, **kwargs: Any) -> None:
        self.calls.append(("redis.set", key, value))
        self.data[key] = value


def _deps(calls: list[Any], tmp: Path) -> Deps:
    settings = RuntimeSettings(instance="guard", bundle_root=tmp / "bundles", stream_prefix="guard")
    client = _Client(calls)

    @asynccontextmanager
    async def connect() -> Any:
        yield mock.Mock(settings=settings, bundle=BundleStore(settings.bundle_root), client=client)

    return Deps(settings=settings, bundle=BundleStore(settings.bundle_root), guard=Guard(None),
                roots=FileRoots.of([tmp]), connect=connect)


def _spy(calls: list[Any], name: str) -> Callable[..., Any]:
    def record(*args: Any, **kwargs: Any) -> None:
        calls.append((name.rsplit(".", 1)[1], _plain(list(args)), _plain(kwargs)))
        return None  # the tool's result is then invalid: the calls, not the result, are observed

    async def arecord(*args: Any, **kwargs: Any) -> None:
        return record(*args, **kwargs)

    return record if name in ("services.mcp.tools.validate", "services.app.runs.plans.show_plan",
                              "services.app.runs.gate.decide_run", "services.app.runs.report.render") else arecord


def observe(tool: str, calls_of: list[dict[str, Any]], tmp: Path, server_of: Callable[[Deps], Any] = build_server
            ) -> list[tuple[list[Any], bool, str]]:
    """For each arguments in `calls_of`, one call of the tool through one client session: (the use-case calls and
    Redis operations, refused or not, the refusal's words when the tool itself refused before any use case)."""
    calls: list[Any] = []
    seen: list[tuple[list[Any], bool, str]] = []
    with contextlib.ExitStack() as stack:
        for target in _USE_CASES:
            stack.enter_context(mock.patch(target, _spy(calls, target)))
        # The spies' empty results fail the tools' output checks, which the SDK logs with a long traceback.
        log = logging.getLogger("mcp.server.mcpserver.server")
        stack.callback(log.setLevel, log.level)
        log.setLevel(logging.CRITICAL)

        async def run() -> None:
            async with Client(server_of(_deps(calls, tmp))) as client:
                for arguments in calls_of:
                    calls.clear()
                    result = await client.call_tool(tool, arguments)
                    text = result.content[0].text if result.is_error and result.content else ""  # type: ignore[union-attr]  # an error's is text
                    own = re.sub(r"0x[0-9a-f]+", "<id>", text) if result.is_error and not calls else ""
                    seen.append((list(calls), bool(result.is_error), own))

        asyncio.run(run())
    return seen


def invoke(tool: str, arguments: dict[str, Any], tmp: Path, server_of: Callable[[Deps], Any] = build_server
           ) -> tuple[list[Any], bool, str]:
    return observe(tool, [arguments], tmp, server_of)[0]


# --- McpSettings -------------------------------------------------------------------------------------------------


def _token_from_env(name: str) -> str:
    return load_token(McpSettings(mcp_token_env=name), environ={"GUARD_TOKEN_A": "a" * 20, "GUARD_TOKEN_B": "b" * 20})


def _token_from_file(tmp: Path, content: str) -> str:
    path = tmp / f"token-{content[0]}"
    path.write_text(content)
    path.chmod(0o600)
    return load_token(McpSettings(mcp_token_file=str(path)))


def _campaign_read(tmp: Path, roots: str) -> str:
    """Whether the server would read tmp/a/campaign.yaml with SPECDEC_MCP_ROOTS=`roots`."""
    try:
        McpSettings(mcp_roots=roots).roots.confine(tmp / "a" / "campaign.yaml", "the campaign file")
    except OutsideRoots:
        return "refused"
    return "read"


def settings_probes(tmp: Path) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """`env SPECDEC_<NAME>` of each McpSettings field -> (the base's behaviour, the changed one's): the bearer
    token `specdec mcp --http` then requires, or whether it reads a campaign file."""
    return {
        "env SPECDEC_MCP_ROOTS": (
            lambda: _campaign_read(tmp, str(tmp / "b")),
            lambda: _campaign_read(tmp, str(tmp / "a")),
        ),
        "env SPECDEC_MCP_TOKEN_ENV": (
            lambda: _token_from_env("GUARD_TOKEN_A"),
            lambda: _token_from_env("GUARD_TOKEN_B"),
        ),
        "env SPECDEC_MCP_TOKEN_FILE": (
            lambda: _token_from_file(tmp, "c" * 20),
            lambda: _token_from_file(tmp, "d" * 20),
        ),
    }
