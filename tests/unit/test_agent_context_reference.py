"""docs/agent-context.md is the reference of what an agent function gets: every public field,
property and method of `AgentContext` (and of a compensation's `Forward`) has a row with a
one-line example, and the README and the definitions reference link to it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from shepherd.engine.agent import AgentContext, Forward

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "agent-context.md").read_text(encoding="utf-8")
# Plumbing the engine fills in: the values they hold are read through `input` and friends.
INTERNAL = {"stored_input", "stored_details", "resolve", "stored_output"}


def _public(cls: type) -> set[str]:
    names = {f.name for f in dataclasses.fields(cls)}
    names |= {n for n, v in vars(cls).items() if isinstance(v, property) or callable(v)}
    return {n for n in names if not n.startswith("_")} - INTERNAL


def _rows(heading: str) -> dict[str, list[str]]:
    section = PAGE.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    cells = [[c.strip() for c in row.strip("|").split(" | ")] for row in rows]
    return {re.sub(r"\(.*\)", "", c[0].strip("`")): c for c in cells}


def test_every_field_and_method_has_a_row_with_an_example() -> None:
    documented = {**_rows("Fields"), **_rows("Methods")}
    assert set(documented) == _public(AgentContext)
    forward = _rows("Forward (compensations)")
    assert set(forward) == _public(Forward)
    for name, cells in {**documented, **forward}.items():
        example = cells[-1]
        assert example.startswith("`") and "ctx." in example, f"{name}: no example ({example})"


def test_the_readme_and_the_definitions_reference_link_it() -> None:
    assert "(docs/agent-context.md)" in (ROOT / "README.md").read_text()
    assert "(agent-context.md)" in (ROOT / "docs" / "definitions.md").read_text()
