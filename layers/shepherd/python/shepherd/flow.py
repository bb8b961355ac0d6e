"""Control flow in native definitions (issue 42.5): a step's `Catch` to a fallback step, the
`Choice` step, and the rules that say which step enters which.

The models a definition's steps carry (`StepSpec.catch`, `StepSpec.choice`) and their checks
across steps, run when a definition loads. A step named by a `Next` (a catcher's, a Choice
rule's or a Choice's `Default`) is *entered* by that step: it runs only when the Catch fires
or the Choice picks it, never at the start, so it has no `DependsOn` of its own. What the
engine makes of them at run time (which step is ready, which is out of scope) is
`shepherd.decisions.scope`; the Choice kind is `shepherd.kinds.choice`.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shepherd.decisions.choice import Condition
from shepherd.suggest import did_you_mean

NAME = r"^[a-z][a-z0-9_]{0,63}$"
ALL = "States.ALL"  # matches every error; alone, in the last catcher
NO_CHOICE_MATCHED = "States.NoChoiceMatched"  # a Choice with no rule true and no Default
MAX_CATCHERS = 20
MAX_CHOICES = 50


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class CatcherSpec(_Model):
    """One catcher: the errors it takes (by name, as `Retry.NonRetryableErrors` names them,
    or `States.ALL`) and the step that runs instead when the step fails for good with one."""

    error_equals: Annotated[
        tuple[Annotated[str, Field(min_length=1, max_length=128)], ...],
        Field(alias="ErrorEquals", min_length=1, max_length=50),
    ]
    next: Annotated[str, Field(alias="Next", pattern=NAME)]

    @field_validator("error_equals")
    @classmethod
    def _all_alone(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if ALL in value and len(value) > 1:
            raise ValueError(f"{ALL} must appear alone in ErrorEquals")
        return value

    def matches(self, error_type: str) -> bool:
        return ALL in self.error_equals or error_type in self.error_equals


class ChoiceRuleSpec(_Model):
    """One rule of a Choice: when its `Condition` holds, `Next` runs."""

    condition: Annotated[Condition, Field(alias="Condition")]
    next: Annotated[str, Field(alias="Next", pattern=NAME)]


class ChoiceSpec(_Model):
    """A Choice step's rules, tried in order: the first that holds picks its `Next`; none does:
    `Default`, or with no Default the step fails with `States.NoChoiceMatched`."""

    choices: Annotated[
        tuple[ChoiceRuleSpec, ...], Field(alias="Choices", min_length=1, max_length=MAX_CHOICES)
    ]
    default: Annotated[str | None, Field(alias="Default", pattern=NAME)] = None

    def targets(self) -> tuple[tuple[str, str], ...]:
        """Every step it may pick, with the field that names it."""
        out = [(f"Choices[{i}].Next", rule.next) for i, rule in enumerate(self.choices)]
        if self.default is not None:
            out.append(("Default", self.default))
        return tuple(out)


class _Step(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...
    @property
    def catch(self) -> tuple[CatcherSpec, ...] | None: ...
    @property
    def choice(self) -> ChoiceSpec | None: ...


def nexts(step: _Step) -> list[tuple[str, str]]:
    """`(field, step named)` for every `Next` of a step (its catchers', its Choice's)."""
    out = [(f"Catch[{i}].Next", c.next) for i, c in enumerate(step.catch or ())]
    if step.choice is not None:
        out += [(f"Choice.{field}", name) for field, name in step.choice.targets()]
    return out


def entered_from(steps: Sequence[_Step]) -> dict[str, str]:
    """Each step a `Next` names, with the step that names it (checked: one each)."""
    out: dict[str, str] = {}
    for step in steps:
        for _, target in nexts(step):
            out.setdefault(target, step.name)
    return out


def check_steps(steps: Sequence[_Step]) -> None:
    """The rules across steps: a `Next` names another step of the definition; a step is named
    by at most one `Next` (one way in); a step so named has no `DependsOn` (it runs only when
    its Catch fires or its Choice picks it). Errors name the step and the field."""
    index = {s.name: i for i, s in enumerate(steps)}
    named: dict[str, str] = {}
    for i, step in enumerate(steps):
        catchers = step.catch or ()
        for j, catcher in enumerate(catchers[:-1]):
            if ALL in catcher.error_equals:  # as ASL validates: a later one could never match
                raise ValueError(
                    f"Steps[{i}] ({step.name}).Catch[{j}].ErrorEquals: {ALL} must be in the "
                    "last catcher"
                )
        seen_here: set[str] = set()
        for field, target in nexts(step):
            where = f"Steps[{i}] ({step.name}).{field}"
            if target not in index:
                raise ValueError(f"{where}: unknown step '{target}'" + did_you_mean(target, index))
            if target == step.name:
                raise ValueError(f"{where}: names its own step")
            if target in seen_here:
                raise ValueError(
                    f"{where}: '{target}' is named by another Next of this step; "
                    "a step is named by one Next at most"
                )
            if target in named:
                raise ValueError(
                    f"{where}: '{target}' is already named by a Next of step '{named[target]}'; "
                    "a step is named by one Next at most"
                )
            seen_here.add(target)
            named[target] = step.name
            target_step = steps[index[target]]
            if target_step.depends_on:
                raise ValueError(
                    f"Steps[{index[target]}] ({target}).DependsOn: a step named by a Next "
                    f"({where}) runs only when that step sends it there; it has no DependsOn"
                )
