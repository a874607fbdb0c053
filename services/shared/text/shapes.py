"""Bundled named workload shapes, in the style of public LLM-API benchmarks.

Public API benchmarks compare endpoints at a few fixed prompt lengths (around
100, 1,000, 10,000 and 100,000 tokens) with a fixed output budget each. A
campaign that has no traffic names one or more of these shapes; the bench then
sends synthetic prompts of exactly that length. Shapes carry lengths only: no
text, no times.
"""

from __future__ import annotations

from contracts.artifacts.profile import Shape
from services.shared.text.errors import UnknownShape

SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape(
            name="short",
            input_tokens=100,
            output_tokens=300,
            description="Short prompt: a one-line question or instruction with a paragraph-long answer.",
        ),
        Shape(
            name="medium",
            input_tokens=1000,
            output_tokens=500,
            description="Medium prompt (the usual default of API benchmarks): a page of instructions or context.",
        ),
        Shape(
            name="long",
            input_tokens=10000,
            output_tokens=500,
            description="Long prompt: a document or code file as context, summarized or answered about.",
        ),
        Shape(
            name="very-long",
            input_tokens=100000,
            output_tokens=500,
            description="Very long prompt: a book chapter or a repository as context (needs a long-context target).",
        ),
    )
}


def resolve(names: list[str] | None) -> list[Shape]:
    """The shapes named (duplicates dropped, order kept); all of them when `names` is empty or None."""
    if not names:
        return list(SHAPES.values())
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        raise UnknownShape(f"unknown workload shape(s) {unknown}: use one of {sorted(SHAPES)}")
    return [SHAPES[n] for n in dict.fromkeys(names)]
