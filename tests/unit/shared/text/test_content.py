"""Content classes."""

from __future__ import annotations

import pytest

from services.shared.text.content import CONTENT_CLASSES, classify
from services.shared.text.forms import TrafficRecord


def rec(prompt: str, completion: str | None = None, *, tools: bool = False, wants_json: bool = False) -> TrafficRecord:
    return TrafficRecord("flat", [{"role": "user", "content": prompt}], prompt, completion,
                         uses_tools=tools, wants_json=wants_json)


CASES = [
    ("agentic", rec("book a flight to Paris", '{"name": "book"}', tools=True), 20),
    ("rag", rec("Summarize the documents.", "They agree."), 5000),
    ("rag", rec("Context:\n[1] the report says ...\nQuestion: what?", "It says ..."), 1500),
    ("structured", rec("List three colours as JSON.", '{"colours": ["red", "green", "blue"]}'), 10),
    ("structured", rec("Give the config.", "Here it is:\n```yaml\na: 1\n```"), 10),
    ("structured", rec("Extract the fields.", "ok", wants_json=True), 10),
    ("code", rec("Fix this:\n```python\nprint(x)\n```", "Use print(y)."), 20),
    ("code", rec("why does this fail", "int main() {\n  int x = 1;\n  return x;\n}"), 20),
    ("math", rec("Solve for x: 3x + 5 = 20", "Subtract 5: 3x = 15, so x = 15 / 3 = 5."), 20),
    ("math", rec("What is \\frac{1}{2} + \\frac{1}{3}?", "5/6"), 20),
    ("multilingual", rec("今天天气怎么样？我们去公园散步吧。", "今天天气很好，适合散步。"), 20),
    ("multilingual", rec("Bonjour, où est la bibliothèque? J'espère qu'elle est près d'ici, merci beaucoup.",
                         "Elle est à côté de l'église, très près."), 20),
    ("chat", rec("How was your weekend?", "Great, thanks for asking! I went hiking."), 10),
]


@pytest.mark.parametrize(("expected", "record", "input_tokens"), CASES)
def test_each_content_class(expected, record, input_tokens):
    assert classify(record, input_tokens) == expected


def test_every_class_is_covered_by_a_case():
    assert {c[0] for c in CASES} == set(CONTENT_CLASSES)


def test_look_alikes_stay_chat():
    # A short marked prompt is not RAG; an accent or two is not multilingual; one sum is not math.
    assert classify(rec("Context: we met at the café.", "Nice!"), 12) == "chat"
    assert classify(rec("I paid 3 + 4 dollars", "ok"), 8) == "chat"
    assert classify(rec("{not json", "[also not"), 5) == "chat"
    assert classify(rec("Meet on 2024-05-01 or 2024-06-01?", "Call 555-1234 on 05/02/2024."), 20) == "chat"
