"""The folders the MCP server reads a caller's files from (services/app/campaign/roots.py), and where a file
failed to parse (services/runtime/errors.parse_error_at), as pure logic over real files."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.app.campaign.roots import FileRoots, OutsideRoots
from services.runtime.errors import parse_error_at


def test_relative_roots_resolve_from_the_working_directory_and_empty_means_it(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path)
    assert FileRoots.parse("").roots == (tmp_path.resolve(),)
    assert FileRoots.parse(f"a{os.pathsep}{os.pathsep}/srv").roots == ((tmp_path / "a").resolve(), Path("/srv"))
    assert FileRoots.parse("a").confine("a/x.yaml", "the campaign file") == (tmp_path / "a" / "x.yaml").resolve()


def test_a_prefix_of_a_root_is_not_under_it_and_a_symlink_loop_is_refused_alike(tmp_path: Path) -> None:
    roots = FileRoots.of([tmp_path / "data"])
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "loop").symlink_to(tmp_path / "data" / "loop")
    refusals = set()
    for path in (tmp_path / "data-other" / "x.yaml", tmp_path / "data" / "loop", Path("/etc/hostname")):
        with pytest.raises(OutsideRoots) as refused:
            roots.confine(path, "traffic.path")
        refusals.add(str(refused.value))
    assert len(refusals) == 1 and "traffic.path" in refusals.pop()


def test_a_parse_error_is_a_position_and_never_the_text(tmp_path: Path) -> None:
    said = {}
    cases: list[tuple[str, str, Callable[[str], Any]]] = [
        ("alias.yaml", "a: 1\nb: *hunter2alias\n", yaml.safe_load),
        ("tag.yaml", "a: !hunter2tag x\n", yaml.safe_load),
        ("scan.yaml", "a:\n  b: hunter2: [\n", yaml.safe_load),
        ("doc.json", '{"a": 1,\n "b": hunter2}', json.loads),
    ]
    for name, text, parse in cases:
        with pytest.raises(Exception) as failed:  # each parser's own error
            parse(text)
        said[name] = parse_error_at(tmp_path / name, failed.value)
    assert said["alias.yaml"].startswith(f"{tmp_path / 'alias.yaml'}:2:4: ")
    assert said["tag.yaml"].startswith(f"{tmp_path / 'tag.yaml'}:1:4: ")
    assert said["scan.yaml"].startswith(f"{tmp_path / 'scan.yaml'}:2:13: ")
    assert said["doc.json"].startswith(f"{tmp_path / 'doc.json'}:2:7: ")
    assert not any("hunter2" in text for text in said.values()), said
