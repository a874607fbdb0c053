"""A tokenizer folder's chat template, rendered as the server renders it.

The corpus step render-checks its records with it and the bench-runner renders chat prompts with it,
so both see the text the target is served with: Hugging Face's `apply_chat_template`, reproduced
(docs/corpus.md#render-check).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.shared.text.errors import RenderCheckFailed, TokenizerUnusable


def _token_text(value: Any) -> str | None:
    # Special tokens are strings or AddedToken dicts ({"content": ...}).
    if isinstance(value, dict):
        content = value.get("content")
        return content if isinstance(content, str) else None
    return value if isinstance(value, str) else None


@dataclass
class ChatTemplate:
    """A loaded chat template and the token counter of the same folder."""

    source: str
    template: Any  # jinja2.Template
    special_tokens: dict[str, str]
    tokenizer: Any | None  # tokenizers.Tokenizer
    model_max_length: int | None

    def render(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.template.render(
            messages=messages, add_generation_prompt=add_generation_prompt, **self.special_tokens
        )

    def count_tokens(self, text: str) -> int | None:
        if self.tokenizer is None:
            return None
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TokenizerUnusable(f"cannot read {path}: {exc}; pass a tokenizer folder with valid JSON files") from exc
    if not isinstance(data, dict):
        raise TokenizerUnusable(f"{path} is not a JSON object")
    return data


def load_chat_template(tokenizer_dir: str | Path) -> ChatTemplate | None:
    """The folder's chat template, or None when it has none (a base model).

    Raises TokenizerUnusable when the folder is missing or its files are
    unreadable, and RenderCheckFailed when the template does not compile."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    folder = Path(tokenizer_dir)
    if not folder.is_dir():
        raise TokenizerUnusable(f"tokenizer folder {folder} does not exist; pass --tokenizer DIR of a local tokenizer")
    config_path = folder / "tokenizer_config.json"
    config = _read_json(config_path) if config_path.is_file() else {}
    source: str | None = None
    text: str | None = None
    jinja_file = folder / "chat_template.jinja"
    if jinja_file.is_file():
        text, source = jinja_file.read_text(encoding="utf-8"), str(jinja_file)
    else:
        raw = config.get("chat_template")
        if isinstance(raw, list):
            named = {t.get("name"): t.get("template") for t in raw if isinstance(t, dict)}
            raw = named.get("default")
        if isinstance(raw, str):
            text, source = raw, f"{config_path}:chat_template"
    if text is None or source is None:
        return None

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False: json.dumps(
        x, indent=indent, ensure_ascii=ensure_ascii
    )
    try:
        template = env.from_string(text)
    except jinja2.exceptions.TemplateError as exc:
        raise RenderCheckFailed(f"chat template {source} does not compile: {exc}; fix the template") from exc
    specials = {
        name: tok
        for name in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")
        if (tok := _token_text(config.get(name))) is not None
    }
    tokenizer = None
    tok_json = folder / "tokenizer.json"
    if tok_json.is_file():
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(tok_json))
        except Exception as exc:  # tokenizers raises a bare Exception on bad files
            raise TokenizerUnusable(f"cannot load {tok_json}: {exc}") from exc
    mml = config.get("model_max_length")
    model_max_length = int(mml) if isinstance(mml, (int, float)) and 0 < mml < 10**7 else None
    return ChatTemplate(source, template, specials, tokenizer, model_max_length)
