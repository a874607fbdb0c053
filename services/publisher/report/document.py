"""The report as a document model, and its two serialisations: Markdown and one self-contained HTML file.

Both come from the same `Document`, so they carry the same numbers, identity pointers (a `Ref(key)` links
to the identity row whose first cell is `Anchor(key)`) and DRAFT marking. The HTML has no script and loads
nothing, under a Content-Security-Policy, so it opens offline (docs/publisher.md#the-report)."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Ref:
    """A pointer to an arm's identity row."""

    key: str


@dataclass(frozen=True)
class Anchor:
    """The target of Refs: the first cell of an identity row."""

    key: str


Inline = str | Ref | Anchor
Text = tuple[Inline, ...]
Cell = Inline | Text  # a table cell: one part, or several (e.g. a list of Refs)


@dataclass(frozen=True)
class Paragraph:
    text: Text


@dataclass(frozen=True)
class Bullets:
    items: tuple[Text, ...]


@dataclass(frozen=True)
class Formula:
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    # True for tables of measured numbers: the first column of every row is a Ref.
    identity_column: bool = True


@dataclass(frozen=True)
class Image:
    name: str  # file under plots/
    title: str
    caption: Text
    png: bytes


Block = Paragraph | Bullets | Formula | Table | Image


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Document:
    title: str
    draft_reasons: tuple[str, ...]
    sections: tuple[Section, ...] = field(default=())

    @property
    def draft(self) -> bool:
        return bool(self.draft_reasons)

    @property
    def full_title(self) -> str:
        return f"DRAFT - {self.title}" if self.draft else self.title

    def heading(self, section: Section) -> str:
        return f"DRAFT - {section.title}" if self.draft else section.title

    def images(self) -> list[Image]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Image)]


def anchor_id(key: str) -> str:
    return f"id-{key}"


# --- Markdown ----------------------------------------------------------------------


def to_markdown(doc: Document, *, plots_dir: str) -> str:
    out = [f"# {doc.full_title}", ""]
    for section in doc.sections:
        out += [f'<a id="{section.id}"></a>', "", f"## {doc.heading(section)}", ""]
        if doc.draft:
            out += ["> **DRAFT**: not final evidence; the reasons are listed under \"Why this is a DRAFT\".", ""]
        for block in section.blocks:
            out += _md_block(block, plots_dir) + [""]
    return "\n".join(out).rstrip() + "\n"


def _md_inline(part: Inline) -> str:
    if isinstance(part, Ref):
        return f"[{part.key}](#{anchor_id(part.key)})"
    if isinstance(part, Anchor):
        return f'<a id="{anchor_id(part.key)}"></a>{part.key}'
    return part


def _md_text(text: Text) -> str:
    return "".join(_md_inline(p) for p in text)


def _md_cell(cell: Cell) -> str:
    text = _md_text(cell) if isinstance(cell, tuple) else _md_inline(cell)
    return text.replace("|", "\\|").replace("\n", " ")


def _md_block(block: Block, plots_dir: str) -> list[str]:
    if isinstance(block, Paragraph):
        return [_md_text(block.text)]
    if isinstance(block, Bullets):
        return [f"- {_md_text(item)}" for item in block.items]
    if isinstance(block, Formula):
        return ["```", *block.lines, "```"]
    if isinstance(block, Table):
        lines = ["| " + " | ".join(block.columns) + " |", "|" + "---|" * len(block.columns)]
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
        return lines
    return [f"![{block.title}]({plots_dir}/{block.name})", "", f"*{_md_text(block.caption)}*"]


# --- HTML --------------------------------------------------------------------------

_CSS = """
body { font-family: DejaVu Sans, Arial, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .6em 0; font-size: .8em; display: block; overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: .2em .5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
figure { margin: 1em 0; } figure img { max-width: 100%; } figcaption { font-size: .85em; color: #555; }
pre { background: #f7f7f7; padding: .6em; font-size: .85em; overflow-x: auto; }
.draft { color: #b00020; font-weight: bold; }
.draft-banner { border: 2px solid #b00020; color: #b00020; padding: .3em .6em; font-weight: bold; }
.draft-mark { position: fixed; top: .4em; right: .6em; color: #b00020; border: 2px solid #b00020;
  padding: .1em .5em; font-weight: bold; background: #fff; z-index: 10; }
section { break-inside: auto; }
"""
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def to_html(doc: Document) -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(doc.full_title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
    ]
    if doc.draft:
        # position: fixed repeats the mark on every printed page.
        parts.append('<div class="draft-mark">DRAFT</div>')
    parts.append(f"<h1>{e(doc.full_title)}</h1>")
    for section in doc.sections:
        parts.append(f'<section id="{e(section.id)}">')
        title = e(section.title)
        parts.append(f'<h2><span class="draft">DRAFT</span> - {title}</h2>' if doc.draft else f"<h2>{title}</h2>")
        if doc.draft:
            parts.append('<p class="draft-banner">DRAFT: not final evidence; the reasons are listed under '
                         '"Why this is a DRAFT".</p>')
        parts.extend(_html_block(block) for block in section.blocks)
        parts.append("</section>")
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


def _html_inline(part: Inline) -> str:
    if isinstance(part, Ref):
        return f'<a href="#{html.escape(anchor_id(part.key))}">{html.escape(part.key)}</a>'
    if isinstance(part, Anchor):
        return f'<span id="{html.escape(anchor_id(part.key))}">{html.escape(part.key)}</span>'
    return html.escape(part)


def _html_text(text: Text) -> str:
    return "".join(_html_inline(p) for p in text)


def _html_cell(cell: Cell) -> str:
    return _html_text(cell) if isinstance(cell, tuple) else _html_inline(cell)


def _html_block(block: Block) -> str:
    if isinstance(block, Paragraph):
        return f"<p>{_html_text(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{_html_text(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Formula):
        return "<pre>" + html.escape("\n".join(block.lines)) + "</pre>"
    if isinstance(block, Table):
        head = "".join(f"<th>{html.escape(c)}</th>" for c in block.columns)
        body = "".join("<tr>" + "".join(f"<td>{_html_cell(c)}</td>" for c in row) + "</tr>" for row in block.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    data = base64.b64encode(block.png).decode("ascii")
    return (
        f'<figure><img alt="{html.escape(block.title)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{_html_text(block.caption)}</figcaption></figure>"
    )
