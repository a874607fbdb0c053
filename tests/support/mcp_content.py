"""The text of an MCP tool result's or resource read's block, for the MCP tests (the SDK types a block as a union)."""

from __future__ import annotations

from mcp_types import TextContent, TextResourceContents


def text_of(block: object) -> str:
    """A text block's text; any other kind of block fails the test that reads it."""
    assert isinstance(block, TextContent | TextResourceContents), f"not a text block: {block!r}"
    return block.text
