"""benchmarks/RESULTS.md opens with a one-screen index: a row per `## ` section, each link a heading.

The index is every line before the first `## ` heading. Links use GitHub's heading anchors: the
heading's text in lower case, punctuation other than `-` and `_` dropped, each space a `-`, and a
repeated anchor suffixed `-1`, `-2`, ... in the order the headings come.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "RESULTS.md"
MAX_INDEX_LINES = 45  # one screen
HEADING = re.compile(r"(#{1,6}) +(.*?) *#* *$")
LINK = re.compile(r"\]\(#([^)\s]+)\)")
LINKED_TEXT = re.compile(r"\[[^\]]*\]\(#[^)\s]+\)")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def anchor(title: str) -> str:
    """GitHub's anchor of a heading's text (before duplicates are numbered)."""
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).strip().lower()  # a link keeps its text
    kept = (c for c in title if c in "- " or unicodedata.category(c)[0] in "LMN" or c == "_")
    return "".join(kept).replace(" ", "-")


def headings(lines: list[str]) -> list[tuple[int, str, int]]:
    """(level, anchor, line index) of every heading, duplicates numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    out = []
    for i, line in enumerate(lines):
        m = HEADING.match(line)
        if not m:
            continue
        slug = anchor(m.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.append((len(m.group(1)), f"{slug}-{n}" if n else slug, i))
    return out


def index_of(lines: list[str]) -> list[str]:
    """The lines before the first `## ` section, without trailing blank lines."""
    end = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
    index = lines[:end]
    while index and not index[-1].strip():
        index.pop()
    return index


def sections(lines: list[str]) -> dict[str, str]:
    """Each heading's anchor -> its text, down to the next heading of the same or a higher level."""
    heads = headings(lines)
    out = {}
    for k, (level, slug, start) in enumerate(heads):
        end = next((i for lv, _, i in heads[k + 1 :] if lv <= level), len(lines))
        out[slug] = "\n".join(lines[start:end])
    return out


def problems(text: str) -> list[str]:
    """What is wrong with the index of a RESULTS.md text; empty when nothing is."""
    lines = text.splitlines()
    index = index_of(lines)
    found = []
    if len(index) > MAX_INDEX_LINES:
        found.append(f"the index is {len(index)} lines, more than one screen ({MAX_INDEX_LINES})")
    targets = {slug for _, slug, _ in headings(lines)}
    linked = set(LINK.findall("\n".join(index)))
    found += [f"the index links #{slug}, which no heading has" for slug in sorted(linked - targets)]
    found += [
        f"no index row links the section at line {i + 1} ({lines[i]}): add a row"
        for level, slug, i in headings(lines)
        if level == 2 and slug not in linked
    ]
    return found


def unsourced_numbers(text: str) -> list[str]:
    """Numbers of an index row that the sections it links to do not state.

    Links' texts are labels, not numbers; a date cell marked `(commit)` is skipped: it comes from the
    history, not from the section."""
    lines = text.splitlines()
    by_anchor = sections(lines)
    found = []
    for row in index_of(lines):
        if not row.startswith("|") or not LINK.search(row):
            continue
        source = "\n".join(by_anchor.get(slug, "") for slug in LINK.findall(row))
        stated = set(NUMBER.findall(source))
        for cell in LINKED_TEXT.sub("", row).split("|"):
            if "(commit)" in cell:
                continue
            found += [f"{n!r} in row {row[:60]!r}..." for n in NUMBER.findall(cell) if n not in stated]
    return found


def test_every_section_has_an_index_row_and_every_link_a_heading():
    assert problems(RESULTS.read_text(encoding="utf-8")) == []


def test_every_number_of_the_index_is_stated_in_the_section_it_links():
    assert unsourced_numbers(RESULTS.read_text(encoding="utf-8")) == []


def test_anchors_follow_github():
    assert anchor("Foundation: ingest and SQL (`benchmarks/bench_sql.py`, issue 2)") == (
        "foundation-ingest-and-sql-benchmarksbench_sqlpy-issue-2"
    )
    assert anchor("`rldata predict` (issue 42) — 3 seeds; ratio >= 0.5") == (
        "rldata-predict-issue-42--3-seeds-ratio--05"
    )
    assert anchor("Issue 44 §3: answers as models write them (`+rldata5`)") == (
        "issue-44-3-answers-as-models-write-them-rldata5"
    )
    lines = ["## Run", "### Notes", "## Run", "### Notes"]
    assert [slug for _, slug, _ in headings(lines)] == ["run", "notes", "run-1", "notes-1"]


def test_the_checks_catch_a_missing_row_a_dead_link_a_long_index_and_an_invented_number():
    good = "# Results\n\n| target | latest | section |\n|---|---|---|\n| a | 1.5x | [a](#a-issue-1) |\n\n"
    good += "## A (issue 1)\n\n1.5x against the baseline.\n\n## B (issue 2)\n\ntext\n"
    assert problems(good) == ["no index row links the section at line 11 (## B (issue 2)): add a row"]
    fixed = good.replace(
        "| a | 1.5x | [a](#a-issue-1) |", "| a, b | 1.5x | [a](#a-issue-1), [b](#b-issue-2) |"
    )
    assert problems(fixed) == [] and unsourced_numbers(fixed) == []
    assert problems(fixed.replace("#b-issue-2", "#b-issue-3")) == [
        "the index links #b-issue-3, which no heading has",
        "no index row links the section at line 11 (## B (issue 2)): add a row",
    ]
    long = fixed.replace("# Results\n", "# Results\n" + "\n" * MAX_INDEX_LINES)
    assert problems(long) == [f"the index is {MAX_INDEX_LINES + 5} lines, more than one screen (45)"]
    assert unsourced_numbers(fixed.replace("| 1.5x |", "| 1.6x |")) == [
        "'1.6' in row '| a, b | 1.6x | [a](#a-issue-1), [b](#b-issue-2) |'..."
    ]
