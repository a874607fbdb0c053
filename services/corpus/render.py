"""Render check: corpus records through the target's chat template.

A corpus the template cannot render, or renders without some of a record's content, trains a draft on
text the server never sees. The template is loaded by services.shared.text.chat_template, the loader the
bench-runner renders its prompts with; what is checked: docs/corpus.md#render-check."""

from __future__ import annotations

from typing import Any

from services.shared.text.chat_template import ChatTemplate
from services.shared.text.errors import RenderCheckFailed

MAX_RENDER_FAILURES_LISTED = 5


def render_check(
    template: ChatTemplate,
    records: list[dict[str, Any]],
    max_model_len: int | None,
) -> dict[str, Any]:
    """Render each record; return the summary, or raise RenderCheckFailed
    naming the failing records (their ids, never their content) and what to do.

    `records` are corpus records as dicts (messages, output_tokens, id)."""
    import jinja2

    errors: list[str] = []
    dropped: list[str] = []
    too_long: list[str] = []
    max_len_seen = 0
    for rec in records:
        try:
            rendered = template.render(rec["messages"])
        except (jinja2.exceptions.TemplateError, TypeError, ValueError, KeyError) as exc:
            errors.append(f"{rec['id']}: {type(exc).__name__}: {exc}")
            continue
        missing = [i for i, m in enumerate(rec["messages"]) if m["content"].strip() not in rendered]
        if missing:
            roles = ", ".join(f"#{i} ({rec['messages'][i]['role']})" for i in missing)
            dropped.append(f"{rec['id']}: message {roles} not in the render")
        n = template.count_tokens(rendered)
        if n is not None:
            total = n + int(rec["output_tokens"])
            max_len_seen = max(max_len_seen, total)
            if max_model_len is not None and total > max_model_len:
                too_long.append(f"{rec['id']}: {n} prompt + {rec['output_tokens']} output tokens > {max_model_len}")
    problems = []
    if errors:
        problems.append(
            f"the template raised on {len(errors)} record(s): " + "; ".join(errors[:MAX_RENDER_FAILURES_LISTED])
        )
    if dropped:
        problems.append(
            f"the template dropped content of {len(dropped)} record(s): "
            + "; ".join(dropped[:MAX_RENDER_FAILURES_LISTED])
        )
    if too_long:
        problems.append(
            f"{len(too_long)} record(s) exceed max_model_len: " + "; ".join(too_long[:MAX_RENDER_FAILURES_LISTED])
        )
    if problems:
        message = (
            f"render check with {template.source} failed: " + " | ".join(problems)
            + ". Fix the chat template, pass the tokenizer folder the target is served with, "
            "or raise --max-model-len to the served maximum."
        )
        # A template's own exception text may quote a message: the error redacts it.
        raise RenderCheckFailed(message)
    return {
        "records_rendered": len(records),
        "max_tokens_seen": max_len_seen if template.tokenizer is not None else None,
    }
