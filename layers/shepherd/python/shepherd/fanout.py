"""Map steps and child workflows in a definition: the `Map` field, the path syntax of
`ItemsPath` / `InputPath`, and the nesting check across a definitions folder.

Kept apart from `shepherd.definitions` (which holds only the hooks: three fields on a step and
one call per rule) so the step kinds other branches add stay separate. The runtime's contract
is docs/architecture.md, "Map steps and child workflows"; the reference is
docs/definitions.md, "Map", "Workflow", "InputPath".

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from shepherd import limits
from shepherd.suggest import did_you_mean

# One key of a path: a JSON object key made of letters, digits, `_` and `-`, or `[n]`.
_KEY = r"[A-Za-z0-9_-]+"
_PART = re.compile(rf"\.({_KEY})|\[(\d{{1,6}})\]")
_STEP = re.compile(r"^\$\.steps\.([a-z][a-z0-9_]{0,63})\.output")
_INPUT = "$.input"
MAX_PATH_CHARS = 256


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class MapSpec(_Model):
    """`Map` on a step: run the step once per item of an array, at most `MaxConcurrency` at a
    time, tolerating some failed items. As in ASL, a tolerance left out does not apply, the
    map fails when a given one is exceeded, and with neither any failure fails it."""

    items_path: Annotated[str, Field(alias="ItemsPath", min_length=1, max_length=MAX_PATH_CHARS)]
    max_concurrency: Annotated[
        int, Field(alias="MaxConcurrency", ge=1, le=limits.MAX_MAP_CONCURRENCY, strict=True)
    ] = limits.DEFAULT_MAP_CONCURRENCY  # strict: "5" and true are no count
    tolerated_failure_percentage: Annotated[
        float | None, Field(alias="ToleratedFailurePercentage", ge=0, le=100)
    ] = None
    tolerated_failure_count: Annotated[
        int | None,
        Field(alias="ToleratedFailureCount", ge=0, le=limits.MAX_MAP_ITEMS, strict=True),
    ] = None


class FanoutStep(Protocol):
    """What these checks read of a step (`shepherd.definitions.StepSpec` has it): a
    protocol, so this module needs nothing of `shepherd.definitions`, which imports it."""

    @property
    def name(self) -> str: ...
    @property
    def agent(self) -> str | None: ...
    @property
    def pool(self) -> str | None: ...
    @property
    def workflow(self) -> str | None: ...
    @property
    def map(self) -> MapSpec | None: ...
    @property
    def input_path(self) -> str | None: ...
    @property
    def heartbeat_seconds(self) -> int | None: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...
    @property
    def is_task(self) -> bool: ...
    @property
    def compensation(self) -> object | None: ...


class FanoutDefinition(Protocol):
    @property
    def steps(self) -> Sequence[FanoutStep]: ...


@dataclass(frozen=True)
class Path:
    """A parsed `$.input...` or `$.steps.<step>.output...` path: where it starts (`step` is
    None for the workflow input) and the keys and indexes below it."""

    step: str | None
    parts: tuple[str | int, ...]


class PathError(ValueError):
    """A path that is not in the syntax, or a value it cannot select."""


def parse_path(text: str) -> Path:
    """Parse a path; the error says what the syntax is, so a definition error can quote it."""
    syntax = (
        "must be $.input, $.input.<key>..., $.steps.<step>.output or "
        "$.steps.<step>.output.<key>... (keys of letters, digits, _ and -, or [n])"
    )
    step: str | None
    if text == _INPUT or text.startswith(_INPUT + ".") or text.startswith(_INPUT + "["):
        step, rest = None, text[len(_INPUT) :]
    else:
        found = _STEP.match(text)
        if found is None:
            raise PathError(f"{text!r} {syntax}")
        step, rest = found.group(1), text[found.end() :]
    parts: list[str | int] = []
    pos = 0
    while pos < len(rest):
        part = _PART.match(rest, pos)
        if part is None:
            raise PathError(f"{text!r} {syntax}")
        parts.append(part.group(1) if part.group(1) is not None else int(part.group(2)))
        pos = part.end()
    return Path(step, tuple(parts))


def select(path: Path, value: Any) -> Any:
    """The value `path.parts` selects in `value` (the input, or the step's output)."""
    node = value
    for i, part in enumerate(path.parts):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path.parts[: i + 1])
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise PathError(f"{where}: no item {part} here")
        elif not isinstance(node, dict) or part not in node:
            raise PathError(f"{where}: no key '{part}' here")
        node = node[part]
    return node


def select_items(path: Path, value: Any) -> list[Any]:
    """A map's items: the array the path selects, at most `MAX_MAP_ITEMS` of them. Raised
    before anything is written (docs/architecture.md, Caps)."""
    items = select(path, value)
    if not isinstance(items, list):
        raise PathError(f"ItemsPath selects a {type(items).__name__}, not an array")
    if len(items) > limits.MAX_MAP_ITEMS:
        raise PathError(
            f"ItemsPath selects {len(items)} items; a map takes at most {limits.MAX_MAP_ITEMS}"
        )
    return items


def check_path(text: str | None, field: str, step: str, depends_on: Sequence[str]) -> None:
    """A path names a step it depends on (its output exists when this step runs)."""
    if text is None:
        return
    try:
        path = parse_path(text)
    except PathError as exc:
        raise ValueError(f"{field}: {exc}") from None
    if path.step is not None and path.step not in depends_on:
        hint = did_you_mean(path.step, depends_on)
        raise ValueError(
            f"{field}: names step '{path.step}', which step '{step}' does not depend on "
            f"(add it to DependsOn){hint}"
        )


def _children(
    definitions: Mapping[str, FanoutDefinition], sources: Mapping[str, str], errors: list[str]
) -> dict[str, list[tuple[int, str, str]]]:
    """Each definition's child-workflow steps (index, step, child); unknown children are
    reported in `errors` and left out."""
    children: dict[str, list[tuple[int, str, str]]] = {}
    for name, definition in definitions.items():
        for i, step in enumerate(definition.steps):
            if step.workflow is None:
                continue
            if step.workflow not in definitions:
                errors.append(
                    f"{sources.get(name, name)}: Steps[{i}] ({step.name}).Workflow: unknown "
                    f"workflow '{step.workflow}'" + did_you_mean(step.workflow, definitions)
                )
                continue
            children.setdefault(name, []).append((i, step.name, step.workflow))
    return children


def check_nesting(
    definitions: Mapping[str, FanoutDefinition], sources: Mapping[str, str]
) -> list[str]:
    """Every `Workflow` a step names exists, no workflow reaches itself, and no chain of
    child workflows is deeper than `MAX_WORKFLOW_NESTING` levels (the root counts as one).

    Returns the errors, each naming the file, the step and the field."""
    errors: list[str] = []
    children = _children(definitions, sources, errors)
    depth: dict[str, int] = {}
    reported: set[tuple[str, str]] = set()

    def levels(name: str, chain: tuple[str, ...]) -> int:
        """Levels below and including `name`; reports a cycle once per step that closes it."""
        if name in depth:
            return depth[name]
        deepest = 1
        for i, step, child in children.get(name, []):
            if child in chain or child == name:
                if (name, step) not in reported:
                    reported.add((name, step))
                    start = chain.index(child) if child in chain else len(chain)
                    loop = " -> ".join((*chain[start:], name, child))
                    errors.append(
                        f"{sources.get(name, name)}: Steps[{i}] ({step}).Workflow: "
                        f"workflow cycle {loop}"
                    )
                continue
            deepest = max(deepest, 1 + levels(child, (*chain, name)))
        depth[name] = deepest
        return deepest

    for name in sorted(definitions):
        levels(name, ())
    for name in sorted(definitions):
        for i, step, child in children.get(name, []):
            below = depth.get(child, 1)
            if 1 + below > limits.MAX_WORKFLOW_NESTING:
                errors.append(
                    f"{sources.get(name, name)}: Steps[{i}] ({step}).Workflow: '{child}' nests "
                    f"{below} levels of workflows; with '{name}' that is {1 + below}, and at most "
                    f"{limits.MAX_WORKFLOW_NESTING} are allowed"
                )
    return errors


# The step fields this module adds, and the value each has when a step does not use it: a
# definition that uses none of them keeps the canonical JSON (and content hash) it had.
_UNSET = {"Workflow": None, "Map": None, "InputPath": None}


def unset_dropped(body: dict[str, Any]) -> dict[str, Any]:
    """The canonical body without the step fields left unset (see `_UNSET`)."""
    steps = [
        {k: v for k, v in step.items() if not (k in _UNSET and v == _UNSET[k])}
        for step in body.get("Steps", [])
    ]
    return {**body, "Steps": steps}


def check_steps(steps: Sequence[FanoutStep]) -> None:
    """Each step is a task (`Agent` and `Pool`) or a child workflow (`Workflow`), never both;
    its paths parse and name only steps it depends on. Raises the first problem, located as
    `Steps[i] (name).Field` like every definition error."""
    for i, step in enumerate(steps):
        at = f"Steps[{i}] ({step.name})"
        if step.workflow is not None:
            for field, value in (("Agent", step.agent), ("Pool", step.pool)):
                if value:
                    raise ValueError(
                        f"{at}.{field}: a step runs an agent or a child workflow, not both "
                        f"(remove {field}, or Workflow)"
                    )
            if step.heartbeat_seconds is not None:
                raise ValueError(
                    f"{at}.HeartbeatSeconds: a Workflow step has no heartbeat (its child "
                    "workflow is supervised on its own; TimeoutSeconds bounds the wait)"
                )
            if step.compensation is not None:
                raise ValueError(
                    f"{at}.Compensation: a Workflow step is undone by its child workflow's own "
                    "compensations (the child ends COMPENSATED); give the child's steps their "
                    "Compensation instead"
                )
        elif step.is_task:  # a Wait or an Approval step names neither
            for field, value in (("Agent", step.agent), ("Pool", step.pool)):
                if not value:
                    raise ValueError(f"{at}.{field}: is required (or Workflow: a child workflow)")
        try:
            check_path(step.input_path, "InputPath", step.name, step.depends_on)
            if step.map is not None:
                check_path(step.map.items_path, "Map.ItemsPath", step.name, step.depends_on)
        except ValueError as exc:
            raise ValueError(f"{at}.{exc}") from None
