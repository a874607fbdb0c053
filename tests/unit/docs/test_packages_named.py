"""A newcomer finds every package in the two documents of the house: each package of the source
(every folder with an `__init__.py` under services/ and contracts/) is named by its path in
docs/architecture.md or docs/design.md, and an event's path through the steps is written there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HOUSE = ("docs/architecture.md", "docs/design.md")


def unnamed_packages(root: Path) -> list[str]:
    text = "\n".join((root / doc).read_text() for doc in HOUSE if (root / doc).exists())
    packages = sorted(
        init.parent.relative_to(root).as_posix()
        for top in ("services", "contracts")
        for init in (root / top).rglob("__init__.py")
    )
    return [p for p in packages if p not in text]


def test_every_package_is_named_in_the_house_documents() -> None:
    missing = unnamed_packages(ROOT)
    assert not missing, f"packages no house document names (add them to docs/architecture.md): {missing}"


def test_a_planted_package_is_found_unnamed(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/architecture.md").write_text("`services/bench/` runs the comparison.\n")
    for package in ("services/bench", "services/bench/planning", "contracts"):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    assert unnamed_packages(tmp_path) == ["contracts", "services/bench/planning"]


def test_the_path_of_an_event_is_written_down() -> None:
    # The walk-through an issue reader is sent to (docs/architecture.md links it): each of its steps
    # cites the module that does the work, and test_cited_paths checks those paths exist.
    design = (ROOT / "docs/design.md").read_text()
    section = design.split("### The path of an event", 1)[-1].split("\n## ", 1)[0]
    assert "### The path of an event" in design
    cited = set(re.findall(r"`([\w/]+\.py)`", section))
    assert {"services/runtime/delivery/consumer.py", "contracts/catalogue.py", "services/profiler/app.py"} <= cited
