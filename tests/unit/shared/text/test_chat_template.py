"""Loading a tokenizer folder's chat template: named templates and chat_template.jinja."""

from __future__ import annotations

import json

from services.shared.text.chat_template import load_chat_template


def test_named_templates_and_jinja_file_are_found(make_tokenizer) -> None:
    folder = make_tokenizer(template=None)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = [
        {"name": "tool_use", "template": "x"},
        {"name": "default", "template": "D{{ messages[0]['content'] }}"},
    ]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    template = load_chat_template(folder)
    assert template is not None and template.render([{"role": "user", "content": "hi"}]) == "Dhi"
    (folder / "chat_template.jinja").write_text("J{{ messages[0]['content'] }}")
    template = load_chat_template(folder)
    assert template is not None and template.render([{"role": "user", "content": "hi"}]) == "Jhi"
