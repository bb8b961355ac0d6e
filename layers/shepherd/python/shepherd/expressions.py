"""JSONata data expressions on native steps (issue 42.5): `Arguments` (the input an agent
gets, or a Pass step's output), `Output` (what is stored as the step's output) and `Assign`
(variables its descendants read, stored on its item in its result's write), written as
Step Functions' JSONata fields: any JSON in which each `{% ... %}` string is an expression,
evaluated by the ASL interpreter's own evaluator (`shepherd.asl.jsonata`, with Step Functions'
functions). What an expression reads:

* `$states.input`: the workflow's input;
* `$states.result` (in `Output` only): what the agent returned (a Pass step: its `Result`, or
  its rendered `Arguments`);
* `$steps.<name>`: the output of a step it depends on (`DependsOn`; a skipped one's is null);
* `$<variable>`: a variable an ancestor's `Assign` set (a step it depends on, directly or
  through others). Each variable is assigned by one step of a definition (refused on load
  otherwise), so every step that sees it sees the one value; a step that did not run (it
  was skipped) set none. `Assign` sees what `Output` sees, before `Output` shapes the result.

A failed evaluation, or one that yields nothing, is `States.QueryEvaluationError`: the step
fails for good (never retried). Expressions are parsed when the definition is loaded, and a
`$steps.<name>` that names no dependency is refused then.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

QUERY_EVALUATION_ERROR = "States.QueryEvaluationError"
_STEP_READ = re.compile(r"\$steps\.([A-Za-z_][A-Za-z0-9_]*)")


class ExpressionError(Exception):
    """An expression that failed (its message is the error's, as Step Functions words it)."""


def _strings(template: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string in a field, with where it is (`Arguments.order.id`, `Output[2]`)."""
    if isinstance(template, str):
        yield where, template
    elif isinstance(template, dict):
        for key, value in template.items():
            yield from _strings(value, f"{where}.{key}")
    elif isinstance(template, list):
        for i, value in enumerate(template):
            yield from _strings(value, f"{where}[{i}]")


def check(template: Any, where: str, depends_on: tuple[str, ...]) -> None:
    """Raise ValueError naming the field when an expression does not parse, or reads a
    step (`$steps.<name>`) that is not one of `depends_on`."""
    from shepherd.asl import jsonata  # noqa: PLC0415 - the evaluator loads on first use
    from shepherd.asl.errors import StatesError  # noqa: PLC0415
    from shepherd.suggest import did_you_mean  # noqa: PLC0415

    for at, text in _strings(template, where):
        if not jsonata.is_expression(text):
            continue
        try:
            jsonata.check(text)
        except StatesError as exc:
            raise ValueError(f"{at}: not a valid JSONata expression: {exc.cause}") from None
        for name in _STEP_READ.findall(text):
            if name not in depends_on:
                raise ValueError(
                    f"{at}: reads $steps.{name}, which is not in its DependsOn"
                    + did_you_mean(name, depends_on)
                )


def render(
    template: Any,
    field: str,
    *,
    workflow_input: Any,
    steps: Mapping[str, Any],
    result: Any = None,
    seed: str = "",
    variables: Mapping[str, Any] | None = None,
) -> Any:
    """`template` with each expression replaced by its value (`ExpressionError` if one
    fails). `steps`: the dependencies' outputs (a skipped one's null). `variables`: those
    its ancestors assigned. `seed` makes `$random()` and `$uuid()` repeatable for one
    attempt."""
    from shepherd.asl import jsonata  # noqa: PLC0415
    from shepherd.asl.errors import StatesError  # noqa: PLC0415

    states: dict[str, Any] = {"input": workflow_input}
    if field == "Output" or field.startswith("Assign"):
        states["result"] = result
    bound = {**(variables or {}), "steps": dict(steps)}
    rng = random.Random(zlib.crc32(seed.encode()))  # repeatable, not for security
    try:
        return jsonata.render(template, states, bound, rng, field)
    except StatesError as exc:
        raise ExpressionError(exc.cause) from None


def assign(
    template: Mapping[str, Any],
    *,
    workflow_input: Any,
    steps: Mapping[str, Any],
    result: Any,
    seed: str,
    variables: Mapping[str, Any] | None = None,
) -> str:
    """The variables an `Assign` sets, as stored (canonical JSON), each value rendered as
    `Output` is (on `$states.result`, before `Output` shapes it); `ExpressionError` if one
    fails or they pass `limits.MAX_ASSIGN_BYTES`."""
    from shepherd import jsonsafe, limits  # noqa: PLC0415

    values = {
        name: render(
            value,
            f"Assign.{name}",
            workflow_input=workflow_input,
            steps=steps,
            result=result,
            seed=f"{seed}/{name}",
            variables=variables,
        )
        for name, value in template.items()
    }
    try:
        text = jsonsafe.dumps(values, what="Assign")
    except jsonsafe.JsonRejected as exc:
        raise ExpressionError(exc.message) from None
    size = jsonsafe.size(text)
    if size > limits.MAX_ASSIGN_BYTES:
        raise ExpressionError(
            f"the variables its Assign sets are {size} bytes; the limit is "
            f"{limits.MAX_ASSIGN_BYTES}"
        )
    return text
