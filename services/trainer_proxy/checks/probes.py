"""Capture-correctness probes, run on the trainer's output after a clean exit: `training/probes.json`.

The built-in probes (checkpoint_loads, vocabulary_matches, forward_pass; a `speculators` head has its
own, speculators_format.py) plus the operator's probe argv (docs/trainer-proxy.md#probes). They run in a
worker thread, so torch is imported once per service and only when a probe runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from contracts import layout
from contracts.envelope import ArtifactRef, RunId, Strict
from services.runtime.bundle.bundle import BundleStore
from services.shared.secret_args import mask_argv
from services.trainer_proxy.checks import speculators_format
from services.trainer_proxy.errors import ExecutorError
from services.trainer_proxy.execution.local import run_process

MAX_PROMPT_TOKENS = 64
SAMPLE_IDS = 32
FALLBACK_PROMPT = "specdec probe: the quick brown fox jumps over the lazy dog."


class ProbeCheck(Strict):
    """One probe's verdict."""

    name: str = Field(description="Probe name: checkpoint_loads, vocabulary_matches, forward_pass "
                      "(head_fits_target for a speculators-format head) or operator.")
    passed: bool = Field(description="True when the probe passed.")
    detail: str = Field(description="What was checked and found, in words.")


class OperatorProbeRun(Strict):
    """The operator's probe as it ran."""

    argv: list[str] = Field(description="The exact argv (no shell).")
    exit_code: int | None = Field(description="Exit status; None when killed.")
    timed_out: bool = Field(description="True when it ran past the probe time limit.")
    duration_s: float = Field(ge=0, description="Wall time in seconds.")
    stdout: ArtifactRef = Field(description="Its stdout.")
    stderr: ArtifactRef = Field(description="Its stderr.")


class ProbeReport(Strict):
    """`training/probes.json`."""

    version: Literal[1] = Field(default=1, description="Format version.")
    run_id: RunId = Field(description="The run.")
    checkpoint_dir: str = Field(description="The directory probed.")
    checks: list[ProbeCheck] = Field(description="Every probe's verdict, built-in first.")
    operator: OperatorProbeRun | None = Field(description="The operator's probe run; None when the campaign has none.")
    passed: bool = Field(description="True only when every probe passed.")

    @property
    def failures(self) -> list[ProbeCheck]:
        return [check for check in self.checks if not check.passed]


def _ok(name: str, detail: str) -> ProbeCheck:
    return ProbeCheck(name=name, passed=True, detail=detail)


def _fail(name: str, detail: str) -> ProbeCheck:
    return ProbeCheck(name=name, passed=False, detail=detail)


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def prompt_text(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """A chat prompt as the target would see it: its chat template, else the turns joined."""
    if getattr(tokenizer, "chat_template", None):
        try:
            return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
        except Exception:  # noqa: BLE001 - a template that cannot render falls back to plain text
            pass
    return "\n".join(message["content"] for message in messages)


def builtin_checks(
    checkpoint_dir: Path, *, target: Path, tokenizer: Path, prompts: list[list[dict[str, str]]]
) -> list[ProbeCheck]:
    """Run the three built-in probes; never raises for a bad checkpoint (that is a finding)."""
    rest = ("vocabulary_matches", "forward_pass")
    if not (checkpoint_dir / "config.json").is_file():
        return [
            _fail("checkpoint_loads", f"no config.json in {checkpoint_dir}: the trainer must save its checkpoint "
                  "(config and weights) to {output_dir}, or to the folder below it that "
                  "commands.train.checkpoint_subdir names"),
            *(_fail(name, "not run: the checkpoint did not load") for name in rest),
        ]
    if speculators_format.is_speculators_checkpoint(checkpoint_dir):  # an EAGLE-3 head: its own probes
        return [ProbeCheck(name=name, passed=ok, detail=detail)
                for name, ok, detail in speculators_format.checks(checkpoint_dir, target)]
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    try:
        config = AutoConfig.from_pretrained(checkpoint_dir)
        model = AutoModelForCausalLM.from_pretrained(checkpoint_dir, dtype=torch.float32)
        model.eval()
    except Exception as exc:  # noqa: BLE001 - any load failure is the probe's finding
        return [_fail("checkpoint_loads", f"{checkpoint_dir} does not load: {_error(exc)}"),
                *(_fail(name, "not run: the checkpoint did not load") for name in rest)]
    params = sum(p.numel() for p in model.parameters())
    checks = [_ok("checkpoint_loads", f"{type(model).__name__} ({config.model_type}), {params} parameters")]
    try:
        target_tok = AutoTokenizer.from_pretrained(tokenizer)
    except Exception as exc:  # noqa: BLE001
        return checks + [
            _fail("vocabulary_matches", f"the target's tokenizer at {tokenizer} does not load: {_error(exc)}"),
            _fail("forward_pass", "not run: no target tokenizer to tokenize prompts with"),
        ]
    target_vocab, source = _target_vocab(target, target_tok)
    checks.append(_vocabulary(model, config, checkpoint_dir, target_tok=target_tok, target_vocab=target_vocab,
                              source=source))
    checks.append(_forward(model, target_tok, target_vocab, prompts))
    return checks


def _target_vocab(target: Path, tokenizer: Any) -> tuple[int, str]:
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(target)
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        return int(text.vocab_size), f"the target checkpoint's config ({target})"
    except Exception:  # noqa: BLE001 - a tokenizer-only target falls back to the tokenizer
        return len(tokenizer), f"the target's tokenizer ({len(tokenizer)} tokens)"


def _vocabulary(
    model: Any, config: Any, checkpoint_dir: Path, *, target_tok: Any, target_vocab: int, source: str
) -> ProbeCheck:
    from transformers import AutoTokenizer

    problems = []
    draft_vocab = int(getattr(config, "vocab_size", 0) or 0)
    head = model.get_output_embeddings()
    rows = int(head.weight.shape[0]) if head is not None else draft_vocab
    if draft_vocab != target_vocab:
        problems.append(f"the draft's vocab_size is {draft_vocab}, the target's is {target_vocab} (from {source})")
    if rows != draft_vocab:
        problems.append(f"the draft's output layer has {rows} rows but its config says vocab_size {draft_vocab}")
    if len(target_tok) > min(rows, draft_vocab or rows):
        problems.append(
            f"the target's tokenizer has {len(target_tok)} tokens, more than the draft's {min(rows, draft_vocab)}")
    sampled = 0
    if any((checkpoint_dir / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        try:
            draft_tok = AutoTokenizer.from_pretrained(checkpoint_dir)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"the output's tokenizer does not load: {_error(exc)}")
        else:
            if len(draft_tok) != len(target_tok):
                problems.append(f"the output's tokenizer has {len(draft_tok)} tokens, the target's {len(target_tok)}")
            count = len(target_tok)
            ids = sorted({round(i * (count - 1) / (SAMPLE_IDS - 1)) for i in range(SAMPLE_IDS)}) if count > 1 else [0]
            ids = [i for i in ids if i < len(draft_tok)]
            mine, theirs = draft_tok.convert_ids_to_tokens(ids), target_tok.convert_ids_to_tokens(ids)
            differ = [(i, a, b) for i, a, b in zip(ids, mine, theirs, strict=True) if a != b]
            sampled = len(ids)
            if differ:
                shown = ", ".join(f"id {i}: {a!r} vs {b!r}" for i, a, b in differ[:5])
                problems.append(f"{len(differ)} of {len(ids)} sampled token IDs map to other strings ({shown})")
    if problems:
        return _fail("vocabulary_matches", "; ".join(problems))
    extra = f"; {sampled} sampled token IDs map to the same strings" if sampled else "; the output carries no tokenizer"
    return _ok("vocabulary_matches", f"vocab_size {draft_vocab} equals the target's (from {source}){extra}")


def _forward(model: Any, tokenizer: Any, target_vocab: int, prompts: list[list[dict[str, str]]]) -> ProbeCheck:
    import torch

    texts = [prompt_text(tokenizer, messages) for messages in prompts] or [FALLBACK_PROMPT]
    note = "" if prompts else " (no heldout prompts: a fixed text)"
    try:
        for text in texts:
            ids = tokenizer(text, return_tensors="pt", truncation=True, max_length=MAX_PROMPT_TOKENS).input_ids
            if ids.shape[-1] == 0:
                continue
            with torch.no_grad():
                logits = model(input_ids=ids).logits
            if logits.shape[-1] != target_vocab:
                return _fail("forward_pass", f"logits have last dimension {logits.shape[-1]}, "
                             f"the target's vocabulary is {target_vocab}")
            if not bool(torch.isfinite(logits).all()):
                return _fail("forward_pass", "the forward pass produced non-finite logits (NaN or inf)")
    except Exception as exc:  # noqa: BLE001 - a forward pass that raises is the finding
        return _fail("forward_pass", f"the forward pass raised {_error(exc)}")
    return _ok("forward_pass", f"{len(texts)} prompt(s){note}: finite logits of last dimension {target_vocab}")


async def run_builtin(
    checkpoint_dir: Path, *, target: Path, tokenizer: Path, prompts: list[list[dict[str, str]]], timeout_s: float
) -> list[ProbeCheck]:
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(builtin_checks, checkpoint_dir, target=target, tokenizer=tokenizer, prompts=prompts),
            timeout=timeout_s,
        )
    except TimeoutError:
        return [_fail("builtin", f"the built-in probes did not finish within {timeout_s:g} s")]


async def run_operator(
    bundle: BundleStore, run_id: str, argv: list[str], *, cwd: str, timeout_s: float, kill_grace_s: float,
    declared_env: list[str] | None = None,
) -> tuple[ProbeCheck, OperatorProbeRun]:
    run_dir = bundle.run_dir(run_id)
    out_path, err_path = layout.TRAINING_PROBE_STDOUT, layout.TRAINING_PROBE_STDERR
    launched, argv = argv, mask_argv(argv)  # recorded and reported with a secret-bearing flag's value masked
    try:
        outcome = await run_process(
            launched, run_id=run_id, cwd=cwd, stdout_path=run_dir / out_path, stderr_path=run_dir / err_path,
            timeout_s=timeout_s, kill_grace_s=kill_grace_s, watch_loss=False, declared_env=declared_env or (),
        )
    except ExecutorError as exc:  # a probe that cannot start is a failed probe
        stdout = bundle.write_bytes(run_id, out_path, b"")
        stderr = bundle.write_bytes(run_id, err_path, str(exc).encode())
        run = OperatorProbeRun(argv=argv, exit_code=None, timed_out=False, duration_s=0.0, stdout=stdout, stderr=stderr)
        return _fail("operator", f"the operator's probe did not start: {exc}"), run
    run = OperatorProbeRun(
        argv=argv, exit_code=outcome.exit_code, timed_out=outcome.timed_out, duration_s=outcome.duration_s,
        stdout=bundle.register_file(run_id, out_path), stderr=bundle.register_file(run_id, err_path),
    )
    if outcome.timed_out:
        return _fail("operator", f"the operator's probe {argv!r} ran past {timeout_s:g} s and was killed"), run
    if outcome.exit_code != 0:
        ended = (f"exited {outcome.exit_code}" if outcome.exit_code is not None
                 else f"was killed by signal {outcome.signal}")
        tail = (run_dir / err_path).read_bytes()[-500:].decode("utf-8", "replace").strip()
        return _fail("operator",
                     f"the operator's probe {argv!r} {ended}" + (f"; stderr tail: {tail}" if tail else "")), run
    return _ok("operator", f"the operator's probe {argv!r} exited 0 in {outcome.duration_s:g} s"), run


def report(
    run_id: str, checkpoint_dir: Path, checks: list[ProbeCheck], operator: OperatorProbeRun | None
) -> ProbeReport:
    return ProbeReport(
        run_id=run_id, checkpoint_dir=str(checkpoint_dir), checks=checks, operator=operator,
        passed=all(check.passed for check in checks),
    )

