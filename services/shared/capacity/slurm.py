"""Slurm observer, read-only: `sinfo` for the nodes, `squeue` for the jobs on them.

Both print `|`-separated fields with the free-text field last, so a `|` inside a reason or comment
cannot shift the others. A busy state with no visible job is believed (squeue may hide other users'
jobs); the rules and selectors are docs/capacity.md's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from contracts.selectors import GRES, NODELIST, PARTITION, Gres, parse_gres
from services.shared.capacity.errors import SchedulerOutputInvalid
from services.shared.capacity.model import NodeView, Workload
from services.shared.capacity.observe import Observation, read_command
from services.shared.scheduler.runner import CommandRunner

SINFO_FORMAT = "%N|%T|%c|%m|%G|%P|%f|%E"
SQUEUE_FORMAT = "%i|%j|%u|%T|%P|%N|%k"
_SINFO_FIELDS = 8
_SQUEUE_FIELDS = 7

# Base states (sinfo %T, flags stripped) where the node can take work.
USABLE_STATES = frozenset({"idle", "mixed", "allocated", "completing"})
BUSY_STATES = frozenset({"mixed", "allocated", "completing"})
# Job states that hold no node: waiting, or done.
NOT_ON_NODE = frozenset(
    {
        "PENDING",
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "PREEMPTED",
        "NODE_FAIL",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)
_EXPERIMENT_RE = re.compile(r"(?:^|[\s,;])experiment=([a-z0-9][a-z0-9-]*)")
_NULL = {"", "(null)", "n/a", "none"}


def sinfo_argv(selectors: Mapping[str, str]) -> list[str]:
    argv = ["sinfo", "--Node", "--noheader", f"--format={SINFO_FORMAT}"]
    if PARTITION in selectors:
        argv.append(f"--partition={selectors[PARTITION]}")
    if NODELIST in selectors:
        argv.append(f"--nodes={selectors[NODELIST]}")
    return argv


def squeue_argv(selectors: Mapping[str, str]) -> list[str]:
    # Every partition and user (--all): a job of another partition on a shared node still occupies it.
    argv = ["squeue", "--all", "--noheader", f"--format={SQUEUE_FORMAT}"]
    if NODELIST in selectors:
        argv.append(f"--nodelist={selectors[NODELIST]}")
    return argv


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm hostlist (`a1,gpu[01-03,7],r[1-2]-n[1-2]`) into node names, in order."""
    names: list[str] = []
    for item in _split_top(text.strip()):
        names.extend(_expand_item(item))
    return names


def _split_top(text: str) -> list[str]:
    items: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise SchedulerOutputInvalid(f"unbalanced ']' in Slurm hostlist {text!r}")
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise SchedulerOutputInvalid(f"unbalanced '[' in Slurm hostlist {text!r}")
    items.append("".join(current))
    return [item for item in items if item]


def _expand_item(item: str) -> list[str]:
    open_at = item.find("[")
    if open_at < 0:
        return [item]
    close_at = item.index("]", open_at)
    prefix, body, rest = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
    heads = []
    for part in body.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise SchedulerOutputInvalid(f"range {part!r} in Slurm hostlist {item!r} is not N or N-M")
        width = len(low)
        for number in range(int(low), int(high or low) + 1):
            heads.append(f"{prefix}{number:0{width}d}")
    tails = _expand_item(rest) if rest else [""]
    return [head + tail for head in heads for tail in tails]


def _opt(value: str) -> str | None:
    value = value.strip()
    return None if value.lower() in _NULL else value


def _number(value: str) -> float | None:
    value = value.strip().rstrip("+")
    try:
        return float(value)
    except ValueError:
        return None


def node_gres(gres: str | None) -> list[Gres]:
    """A node's configured GRES from sinfo %G: `gpu:4`, `gpu:a100:8(S:0-1)`, several
    comma-separated (a comma inside the socket list does not split)."""
    if gres is None:
        return []
    items: list[str] = []
    depth = 0
    current: list[str] = []
    for char in gres + ",":
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
        if char == "," and depth <= 0:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    found = []
    for item in filter(None, items):
        fields = re.sub(r"\(.*\)$", "", item).split(":")
        count = int(fields.pop()) if len(fields) > 1 and fields[-1].isdigit() else 1
        found.append(Gres(name=fields[0], type=fields[1] if len(fields) > 1 else None, count=count))
    return found


def _gpus(gres: str | None) -> int | None:
    if gres is None:
        return None
    return sum(item.count for item in node_gres(gres) if item.name == "gpu")


def gres_blockers(gres: str | None, wanted: list[Gres]) -> list[str]:
    """Why a node cannot run a job that asks `--gres` for `wanted`: the items it lacks
    (or has too few of), against its configured GRES. Empty when it has them all."""
    have = node_gres(gres)
    missing = []
    for want in wanted:
        count = sum(h.count for h in have if h.name == want.name and (want.type is None or h.type == want.type))
        if count < want.count:
            missing.append(str(want))
    if not missing:
        return []
    shown = ",".join(str(h) for h in have) or "none"
    return [
        f"lacks generic resource {','.join(missing)} (sinfo %G: {shown}); capacity.selectors.{GRES} asks for it, "
        "so Slurm would never start the job here"
    ]


def base_state(state: str) -> str:
    """sinfo %T without its flag suffixes (`*` not responding, `~` powered down, ...)."""
    return state.strip().lower().rstrip("*~#!%$@^-+").split("+")[0]


def state_blockers(state: str) -> list[str]:
    """Why a node's own state rules it out (down, drained, not responding); empty when usable."""
    text = state.strip().lower()
    if "*" in text:
        return [f"scheduler state {state!r}: not responding"]
    if base_state(text) not in USABLE_STATES or "drain" in text:
        return [f"scheduler state {state!r}: not usable (down, drained, reserved or unknown)"]
    return []


def parse_sinfo(text: str, gres: str | None = None) -> list[NodeView]:
    """Nodes from `sinfo --Node` with SINFO_FORMAT; a node listed once per partition is merged.
    `gres` (capacity.selectors.gres) rules out the nodes that lack it."""
    wanted = parse_gres(gres) if gres else []
    nodes: dict[str, dict] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|", _SINFO_FIELDS - 1)
        if len(fields) != _SINFO_FIELDS:
            raise SchedulerOutputInvalid(f"sinfo line {number} has {len(fields)} fields, not {_SINFO_FIELDS}: {line!r}")
        name, state, cpus, memory, node_gres_text, partition, features, reason = (f.strip() for f in fields)
        node = nodes.setdefault(
            name,
            {
                "name": name,
                "state": state,
                "partitions": [],
                "cpus": _number(cpus),
                "memory_mb": _number(memory),
                "gpus": _gpus(_opt(node_gres_text)),
                "labels": {},
                "reason": _opt(reason),
                "gres": _opt(node_gres_text),
            },
        )
        partition = partition.rstrip("*")
        if partition and partition not in node["partitions"]:
            node["partitions"].append(partition)
        for feature in (_opt(features) or "").split(","):
            if feature:
                node["labels"][f"feature.{feature}"] = "true"
    views = []
    for node in nodes.values():
        reason, configured = node.pop("reason"), node.pop("gres")
        blockers = state_blockers(node["state"])
        if blockers and reason:
            blockers = [f"{blockers[0]} (reason: {reason})"]
        if wanted:
            blockers += gres_blockers(configured, wanted)
        views.append(NodeView(**node, blockers=blockers))
    return views


def parse_squeue(text: str) -> list[tuple[list[str], Workload]]:
    """Jobs from `squeue` with SQUEUE_FORMAT that hold nodes: (node names, job)."""
    jobs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|", _SQUEUE_FIELDS - 1)
        if len(fields) != _SQUEUE_FIELDS:
            raise SchedulerOutputInvalid(
                f"squeue line {number} has {len(fields)} fields, not {_SQUEUE_FIELDS}: {line!r}"
            )
        job_id, name, user, state, partition, nodelist, comment = (f.strip() for f in fields)
        if state.upper() in NOT_ON_NODE or _opt(nodelist) is None:
            continue
        match = _EXPERIMENT_RE.search(comment)
        workload = Workload(
            kind="slurm_job",
            ref=job_id,
            name=name,
            state=state,
            experiment=match.group(1) if match else None,
            detail=f"user {user}, partition {partition}",
        )
        jobs.append((expand_hostlist(nodelist), workload))
    return jobs


def assemble(nodes: list[NodeView], jobs: list[tuple[list[str], Workload]]) -> list[NodeView]:
    """Attach each job to its nodes; a busy state with no visible job becomes a blocker."""
    on_node: dict[str, list[Workload]] = {}
    for names, job in jobs:
        for name in names:
            on_node.setdefault(name, []).append(job)
    out = []
    for node in nodes:
        workloads = on_node.get(node.name, [])
        blockers = list(node.blockers)
        if not workloads and not blockers and node.state and base_state(node.state) in BUSY_STATES:
            blockers.append(
                f"scheduler state {node.state!r} says busy but no job on it is visible "
                "(squeue may hide other users' jobs); believed busy"
            )
        out.append(node.model_copy(update={"workloads": workloads, "blockers": blockers}))
    return out


def observe(selectors: Mapping[str, str], runner: CommandRunner) -> Observation:
    """Read the nodes and the jobs on them. Reads only: nothing is submitted or changed."""
    observation = Observation()
    nodes = parse_sinfo(read_command(observation, runner, "sinfo", sinfo_argv(selectors)), selectors.get(GRES))
    jobs = parse_squeue(read_command(observation, runner, "squeue", squeue_argv(selectors)))
    observation.nodes = assemble(nodes, jobs)
    return observation
