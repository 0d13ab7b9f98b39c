"""The docs stay readable and true to the tree: README short, every benchmarks/ file indexed, lines <= 120 characters,
every relative link resolving."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
DOCS = sorted((REPO / "docs").glob("*.md"))
# Pages README links to before they exist: other work adds them with their features. Once present they are checked
# like every other page; until then a link to one is the only link allowed to dangle.
PENDING_PAGES = {REPO / "docs" / "network.md", REPO / "docs" / "pairs.md"}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(page: Path) -> list[str]:
    """Targets of Markdown links and images that point into the tree (no scheme, no bare anchor)."""
    targets = LINK.findall(page.read_text(encoding="utf-8"))
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def test_readme_is_at_most_150_lines():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail to docs/"


def test_every_file_under_benchmarks_is_named_in_its_index():
    index = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    # a benchmark script run here leaves Python's byte code beside it (git ignores it): not a record to name; nor
    # are SQLite's -wal/-shm beside a recorded store while another test worker reads it (CI run 116 listed them)
    files = [p.relative_to(BENCHMARKS).as_posix() for p in BENCHMARKS.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(("-wal", "-shm", "-journal"))]
    assert len(files) > 10
    unnamed = sorted(f for f in files if f != "README.md" and f"`{f}`" not in index)
    assert not unnamed, f"benchmarks/README.md does not name: {unnamed}"


@pytest.mark.parametrize("page", [*DOCS, REPO / "ARCHITECTURE.md"], ids=lambda p: p.name)
def test_lines_are_at_most_120_characters(page):
    long = [(n, len(line)) for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if len(line) > 120]
    assert not long, f"{page.name}: lines longer than 120 characters (line, length): {long}"


def test_the_docs_pages_readme_names_exist():
    assert {p.name for p in DOCS} >= {"configuration.md", "bisect.md", "search.md", "bench.md", "clusters.md",
                                      "throughput.md", "hang-diagnosis.md", "reports.md"}


@pytest.mark.parametrize("page", [REPO / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    links = relative_links(page)
    broken = []
    for target in links:
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() and path not in PENDING_PAGES:
            broken.append(target)
    assert not broken, f"{page.name}: links to nothing: {broken}"


def test_the_link_finder_sees_links_and_images_and_skips_urls(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("[a](docs/a.md) ![b](img.png#x) [c](https://x.org/y) [d](#here) [e](mailto:x@y.org)\n")
    assert relative_links(page) == ["docs/a.md", "img.png#x"]
