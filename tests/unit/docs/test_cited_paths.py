"""Every repository path and anchor cited in a .py or .md file exists (tests/unit/docs/citations.py says
what counts as a citation), and the checker finds what is planted missing in a tree of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.docs.citations import check, slug

ROOT = Path(__file__).resolve().parents[3]


def test_every_cited_path_and_anchor_exists() -> None:
    problems = check(ROOT)
    assert not problems, "citations that do not resolve:\n" + "\n".join(str(p) for p in problems)


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Principle 1: no inert configuration", "principle-1-no-inert-configuration"),
        ("Redis is the transport; the bundle is the record", "redis-is-the-transport-the-bundle-is-the-record"),
        ("Spec-decode deltas (`metrics.py`)", "spec-decode-deltas-metricspy"),
        ("A service's parts", "a-services-parts"),
        ("Step 3: capacity", "step-3-capacity"),
        ("[Draft reuse](#draft-reuse) and more", "draft-reuse-and-more"),
        ("bench_cli: how long a command takes", "bench_cli-how-long-a-command-takes"),
    ],
)
def test_anchors_are_computed_as_github_does(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def _plant(text: str) -> str:
    # Spelled in capitals here so that this file's own lines cite nothing missing.
    return text.replace("DOCS/", "docs/").replace("SERVICES/", "services/").replace(".MD", ".md")


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / _plant(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_plant(text), encoding="utf-8")
    return tmp_path


def test_the_checker_reports_each_planted_citation_that_does_not_resolve(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "DOCS/a.MD": (
            "# A\n\n## Real heading\n\n## Real heading\n\n**Bold lead.** text\n\n"
            "```\n## not a heading\n[x](nowhere.MD)\n```\n"
            "[ok](b.MD#b-title) [web](https://example.com/x.MD) [self](#real-heading-1)\n"
            "[gone](gone.MD) [bad anchor](b.MD#nope) [bad self](#not-a-heading)\n"
        ),
        "DOCS/b.MD": "# B title\n",
        "SERVICES/mod.py": (
            '"""See DOCS/a.MD#real-heading, DOCS/a.MD, "Real heading" and DOCS/a.MD, "Bold lead".\n'
            "Missing: DOCS/missing.MD, DOCS/a.MD#no-such-heading, DOCS/a.MD,\n"
            '"No such section", SERVICES/mod.py::nothere, SERVICES/mod.helper, SERVICES/mod.absent, (GONE.MD).\n'
            'Not one path: SERVICES/mod_*.py, SERVICES/<step>/app.py."""\n\n'
            "def helper() -> None:\n    pass\n"
        ),
        ".venv/lib/x.py": "DOCS/missing.MD\n",
        "node_modules/y.MD": "[gone](gone.MD)\n",
    })
    found = {(p.file, p.line, p.citation) for p in check(root)}
    expected = {
        ("DOCS/a.MD", 14, "gone.MD"),
        ("DOCS/a.MD", 14, "b.MD#nope"),
        ("DOCS/a.MD", 14, "#not-a-heading"),
        ("SERVICES/mod.py", 2, "DOCS/missing.MD"),
        ("SERVICES/mod.py", 2, "DOCS/a.MD#no-such-heading"),
        ("SERVICES/mod.py", 2, 'DOCS/a.MD, "No such section"'),
        ("SERVICES/mod.py", 3, "SERVICES/mod.py::nothere"),
        ("SERVICES/mod.py", 3, "SERVICES/mod.absent"),
        ("SERVICES/mod.py", 3, "GONE.MD"),
    }
    assert found == {(_plant(file), line, _plant(citation)) for file, line, citation in expected}


def test_a_problem_names_file_line_and_citation(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"README.MD": "intro\nsee DOCS/nothing.MD#x\n"})
    (problem,) = check(root)
    assert str(problem) == _plant("README.md:2: 'DOCS/nothing.MD#x': no such file or folder")
