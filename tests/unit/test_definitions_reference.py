"""docs/definitions.md stays the reference of the definition models: every field of every
model has a row with its default, every example in it is a valid definition (or part of one),
and the README and the tutorial link to it."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from shepherd.decisions.choice import Condition
from shepherd.definitions import (
    ApprovalSpec,
    CompensationSpec,
    Definition,
    PassSpec,
    RepeatSpec,
    RetryPolicy,
    ScheduleSpec,
    StepSpec,
    WaitForSignalSpec,
    WaitSpec,
    parse_definition,
)
from shepherd.fanout import MapSpec, check_steps

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "definitions.md"
TEXT = REFERENCE.read_text(encoding="utf-8")

# Each model and the section that documents it. A new step kind adds its section here.
SECTIONS: dict[str, type[BaseModel]] = {
    "Workflow": Definition,
    "Task step": StepSpec,
    "Condition": Condition,
    "Repeat": RepeatSpec,
    "Retry": RetryPolicy,
    "Compensation": CompensationSpec,
    "Map": MapSpec,
    "Wait step": WaitSpec,
    "Approval step": ApprovalSpec,
    "Schedules": ScheduleSpec,
    "WaitForSignal step": WaitForSignalSpec,
    "Pass step": PassSpec,
}


def _sections() -> dict[str, str]:
    """Each heading's own text (up to the next heading of any level)."""
    parts = re.split(r"^#{2,4} (.+)$", TEXT, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _table(section: str) -> dict[str, list[str]]:
    """The first table of a section: each row's cells by its first cell (a field name)."""
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    cells = [[c.strip() for c in row.strip("|").split(" | ")] for row in rows]
    return {c[0].strip("`"): c[1:] for c in cells}


def _rendered(model: type[BaseModel], name: str) -> str:
    field = model.model_fields[name]
    default = field.default
    if field.is_required() or default == "":  # Agent, Pool: required of a task step
        return "required"
    if default is None:
        return "none"
    if isinstance(default, BaseModel):
        return "see [Retry](#retry)"
    if isinstance(default, tuple):
        return f"`{list(default)}`".replace("'", "")
    if isinstance(default, bool):  # as a definition writes it (YAML, JSON)
        return "`true`" if default else "`false`"
    if isinstance(default, float):
        return f"`{default:g}`"
    return f"`{default}`"


@pytest.mark.parametrize(("heading", "model"), SECTIONS.items())
def test_every_field_has_a_row_with_its_default_and_its_asl_meaning(
    heading: str, model: type[BaseModel]
) -> None:
    table = _table(_sections()[heading])
    fields = {f.alias: name for name, f in model.model_fields.items()}
    assert set(table) == set(fields), (
        f"{heading}: documented {sorted(table)}, model {sorted(fields)}"
    )
    for alias, name in fields.items():
        default, meaning, asl = table[alias]
        assert default.startswith(_rendered(model, name)), f"{heading}.{alias}: {default}"
        assert meaning and asl, f"{heading}.{alias} has no meaning or no ASL column"


def _examples() -> list[tuple[str, str]]:
    found = []
    for heading, body in _sections().items():
        found += [(heading, block) for block in re.findall(r"```yaml\n(.*?)```", body, re.S)]
    return found


@pytest.mark.parametrize(("heading", "block"), _examples())
def test_every_example_is_valid(heading: str, block: str) -> None:
    data: Any = yaml.safe_load(textwrap.dedent(block))
    if isinstance(data, list):  # steps of a Steps list
        steps = [StepSpec.model_validate(step) for step in data]
        check_steps(steps)  # the rules across a step's fields (kind, paths)
    elif "Steps" in data:
        parse_definition(data, f"docs/definitions.md ({heading})")
    else:
        ((key, value),) = data.items()
        {"Retry": RetryPolicy, "Compensation": CompensationSpec, "Condition": Condition}[
            key
        ].model_validate(value)


def test_the_retry_semantics_are_stated_plainly() -> None:
    retry = _sections()["Retry"]
    assert "**`MaxAttempts` counts retries after the first attempt, as in ASL**" in retry
    policy = RetryPolicy()
    assert (
        f"a failed attempt is retried up to {policy.max_attempts} times, "
        f"{policy.interval_seconds:g} s, {policy.interval_seconds * policy.backoff_rate:g} s "
        f"and {policy.interval_seconds * policy.backoff_rate**2:g} s after each failure"
    ) in retry
    formula = "d = min(IntervalSeconds \N{MULTIPLICATION SIGN} BackoffRate^(n\N{MINUS SIGN}1), "
    assert formula + "MaxDelaySeconds)" in retry


def test_the_readme_and_the_tutorial_link_to_it() -> None:
    assert "(docs/definitions.md)" in (ROOT / "README.md").read_text()
    assert "(definitions.md)" in (ROOT / "docs" / "tutorial.md").read_text()


def test_the_contents_link_every_section_in_order() -> None:
    """Every `##` and `###` heading is in the contents, in the document's order (a section
    left out, as Wait and Approval once were, is a section a reader never finds)."""
    contents = TEXT[TEXT.index("Contents:") : TEXT.index("\n\n", TEXT.index("Contents:"))]
    linked = re.findall(r"\[([^\]]+)\]\(#([a-z0-9-]+)\)", contents)
    headings = re.findall(r"^#{2,3} (.+)$", TEXT, flags=re.MULTILINE)
    assert [title for title, _ in linked] == headings
    for title, anchor in linked:
        assert anchor == re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def test_it_links_the_agent_context_reference() -> None:
    assert "(agent-context.md)" in _sections()["Task step"]
