"""The unit tests mirror the source: a module's tests are found where the module is.

A unit test file lies in tests/unit/<package>/, below it in the folders of the package's own
sub-packages (services/bench/planning/ -> tests/unit/bench/planning/), where <package> is one of
services/' packages, `contracts`, `examples` (infra/examples/) or `perf` (tests/perf/'s tools); or
in one of the cross-cutting folders (CROSS_CUTTING), whose checks span every package. Besides:

- no test file directly in tests/unit;
- no test file name in two tiers (tests/unit, integration, e2e, perf, compose): a bare file name,
  as a failure summary or a document gives it, then means one file;
- no test file name repeating a folder it lies in below tests/unit (a test_bench_plan.py in
  tests/unit/bench says "bench" twice; test_plan.py in tests/unit/bench/planning says each word once).

Folders that hold no test file (fixtures/, golden/) are data and are not checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# tests/unit/<name>/ with no source package of that name, and why each exists.
CROSS_CUTTING = {
    "architecture": "checks of docs/architecture.md's rules that read every package (layering, this layout)",
    "docs": "checks of the repository's text: every cited path exists",
    "guard": "no inert configuration (docs/design.md#principle-1-no-inert-configuration) over every surface",
}

# Source folders beside services/' packages that unit tests mirror, by their folder in tests/unit.
OTHER_SOURCES = {"contracts": "contracts", "examples": "infra/examples", "perf": "tests/perf"}

TIERS = ("unit", "integration", "e2e", "perf", "compose")


def mirrored_sources(root: Path) -> dict[str, Path]:
    """tests/unit/<name> -> the source folder its sub-folders mirror."""
    sources = {path.parent.name: path.parent for path in sorted((root / "services").glob("*/__init__.py"))}
    sources.update({name: root / folder for name, folder in OTHER_SOURCES.items()})
    return sources


def _repeats(stem_words: list[str], folder: str) -> bool:
    words = folder.split("_")
    return any(stem_words[i:i + len(words)] == words for i in range(len(stem_words) - len(words) + 1))


def layout_problems(root: Path) -> list[str]:
    """Every breach of the layout under root/tests, one line each."""
    unit = root / "tests" / "unit"
    sources = mirrored_sources(root)
    problems = []
    for path in sorted(unit.rglob("test_*.py")):
        rel = path.relative_to(unit)
        folders = rel.parts[:-1]
        shown = path.relative_to(root)
        if not folders:
            problems.append(f"{shown}: loose in tests/unit; it belongs in the folder of the package it tests")
            continue
        top = folders[0]
        if top in sources:
            source = sources[top].joinpath(*folders[1:])
            if not source.is_dir():
                problems.append(f"{shown}: {source.relative_to(root)} is no source folder to mirror")
        elif top not in CROSS_CUTTING:
            problems.append(f"{shown}: tests/unit/{top} names no source package and no cross-cutting folder")
        stem_words = path.stem.removeprefix("test_").split("_")
        for folder in folders:
            if _repeats(stem_words, folder):
                problems.append(f"{shown}: the name repeats its folder {folder!r}")
    tiers: dict[str, list[Path]] = {}
    for tier in TIERS:
        for path in sorted((root / "tests" / tier).rglob("test_*.py")):
            tiers.setdefault(path.name, []).append(path.relative_to(root))
    for name, paths in sorted(tiers.items()):
        if len({path.parts[1] for path in paths}) > 1:
            problems.append(f"{name}: in more than one tier: {', '.join(map(str, paths))}")
    return problems


def test_the_unit_tests_mirror_the_source() -> None:
    assert layout_problems(ROOT) == []


def test_every_cross_cutting_folder_exists_and_is_no_source_package() -> None:
    sources = mirrored_sources(ROOT)
    for name in CROSS_CUTTING:
        assert (ROOT / "tests/unit" / name).is_dir(), name
        assert name not in sources, f"{name} is a source package: its tests mirror it"


def _tree(root: Path, *files: str) -> Path:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    return root


# The planted trees' test files are named from their tests/ folder: written from the repository
# root they would read as citations of files that do not exist here (tests/unit/docs).
@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A repository with one service package (bench, its planning sub-package), contracts, the
    examples and the perf tools, and a test of each place a test may be."""
    _tree(tmp_path, "services/bench/__init__.py", "services/bench/planning/__init__.py", "contracts/__init__.py",
          "infra/examples/smollm2.py", "tests/perf/runner.py")
    _tree(tmp_path / "tests", "unit/bench/planning/test_plan.py", "unit/bench/planning/fixtures/sample.json",
          "unit/contracts/test_argv.py", "unit/examples/test_smollm2.py", "unit/perf/test_runner.py",
          "unit/guard/test_surfaces.py", "integration/test_bench_service.py")
    return tmp_path


def test_a_tree_that_mirrors_its_source_has_no_problem(source: Path) -> None:
    assert layout_problems(source) == []


@pytest.mark.parametrize(("planted", "named"), [
    ("unit/test_loose.py", "unit/test_loose.py: loose in tests/unit"),
    ("unit/nosuch/test_thing.py", "nosuch names no source package and no cross-cutting folder"),
    ("unit/bench/executors/test_pod.py", "bench/executors is no source folder to mirror"),
    ("unit/bench/test_bench_plan.py", "unit/bench/test_bench_plan.py: the name repeats its folder 'bench'"),
    ("unit/bench/planning/test_bench_rounds.py", "the name repeats its folder 'bench'"),
    ("unit/bench/planning/test_planning_rules.py", "the name repeats its folder 'planning'"),
    ("integration/test_plan.py", "in more than one tier: tests/unit/bench/planning/test_plan.py, tests/integration"),
    ("e2e/test_argv.py", "test_argv.py: in more than one tier"),
])
def test_a_planted_breach_is_named(source: Path, planted: str, named: str) -> None:
    _tree(source / "tests", planted)
    problems = layout_problems(source)
    assert len(problems) == 1, problems
    assert named in problems[0]


def test_a_name_holding_a_folder_word_inside_another_word_is_no_repeat(source: Path) -> None:
    _tree(source / "tests", "unit/bench/planning/test_plans_benched.py", "unit/bench/test_run_benchmark.py")
    assert layout_problems(source) == []
