"""JSONata data expressions on native steps (issue 42.5): `Arguments` is the input an agent
gets (or a Pass step's output) and `Output` shapes what is stored, reading `$states.input`,
`$states.result` and `$steps.<dependency>`; a failed expression fails the step for good with
States.QueryEvaluationError. On the real engine over in-memory ports."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd import AgentRegistry, limits
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.testing import MemoryEngine
from shepherd_handlers.views import workflow_view


def _task(name: str, *deps: str, **extra: Any) -> dict[str, Any]:
    return {
        "Name": name,
        "Agent": "work",
        "Pool": "p",
        "TimeoutSeconds": 10,
        "Retry": {"MaxAttempts": 3, "IntervalSeconds": 0},
        "DependsOn": list(deps),
        **extra,
    }


class Run:
    def __init__(self, *steps: dict[str, Any], returns: dict[str, Any] | None = None) -> None:
        self.inputs: dict[str, list[Any]] = {}
        self.returns = returns or {}
        definition = parse_definition({"Name": "data", "Steps": list(steps)}, "data.yaml")
        registry = AgentRegistry()

        @registry.agent("work")
        def work(ctx: AgentContext) -> Any:
            self.inputs.setdefault(ctx.step, []).append(ctx.input)
            return self.returns.get(ctx.step, {"step": ctx.step})

        self.engine = MemoryEngine({"data": definition}, agents=registry)

    def run(self, payload: Any) -> Any:
        wf = self.engine.start("data", payload)
        self.engine.deliver()
        return self.engine.outcome(wf)


def test_arguments_build_the_agents_input_from_the_input_and_a_dependency() -> None:
    run = Run(
        _task("price"),
        _task(
            "charge",
            "price",
            Arguments={
                "order": "{% $states.input.order_id %}",
                "cents": "{% $steps.price.amount * 100 %}",
                "fixed": [1, "two"],
            },
        ),
        returns={"price": {"amount": 12.5}},
    )
    outcome = run.run({"order_id": "o-1"})
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert run.inputs["charge"] == [{"order": "o-1", "cents": 1250, "fixed": [1, "two"]}]
    assert run.inputs["price"] == [{"order_id": "o-1"}]  # no Arguments: the workflow input


def test_output_shapes_what_is_stored_and_what_dependents_read() -> None:
    run = Run(
        _task("fetch", Output="{% {'id': $states.result.id, 'n': $count($states.result.items)} %}"),
        _task("use", "fetch", Arguments="{% $steps.fetch %}"),
        returns={"fetch": {"id": 7, "items": [1, 2, 3], "noise": "x" * 50}},
    )
    outcome = run.run({})
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["fetch"].output == {"id": 7, "n": 3}
    assert run.inputs["use"] == [{"id": 7, "n": 3}]


def test_a_pass_step_renders_its_arguments_and_shapes_them_with_output() -> None:
    run = Run(
        _task("a"),
        {
            "Name": "merge",
            "Pass": {},
            "DependsOn": ["a"],
            "Arguments": {"who": "{% $states.input.user %}", "from_a": "{% $steps.a.step %}"},
            "Output": "{% $merge([$states.result, {'done': true}]) %}",
        },
        {"Name": "fixed", "Pass": {"Result": [1, 2]}, "Output": "{% $sum($states.result) %}"},
    )
    outcome = run.run({"user": "ada"})
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["merge"].output == {"who": "ada", "from_a": "a", "done": True}
    assert outcome.steps["fixed"].output == 3


@pytest.mark.parametrize(
    ("field", "expression"),
    [("Arguments", "{% $states.input.missing %}"), ("Output", "{% $number('x') %}")],
)
def test_a_failed_expression_fails_the_step_for_good(field: str, expression: str) -> None:
    run = Run(_task("a", **{field: expression}), _task("b", "a"))
    outcome = run.run({})
    assert outcome.status is WorkflowStatus.COMPENSATED
    step = outcome.steps["a"]
    assert step.status is StepStatus.FAILED
    assert step.error is not None and step.error.name == "States.QueryEvaluationError"
    assert len(step.attempts) == 1  # never retried, though its Retry allows 3
    assert len(run.inputs.get("a", [])) == (1 if field == "Output" else 0)
    assert "b" not in run.inputs


def test_a_failed_pass_expression_fails_it_in_its_one_write() -> None:
    run = Run(
        _task("a"),
        {"Name": "shape", "Pass": {}, "DependsOn": ["a"], "Output": "{% $states.result.x %}"},
        _task("b", "shape"),
    )
    outcome = run.run({})
    assert outcome.status is WorkflowStatus.COMPENSATED
    step = outcome.steps["shape"]
    assert step.status is StepStatus.FAILED
    assert step.error is not None and step.error.name == "States.QueryEvaluationError"
    assert "returned nothing" in step.error.message
    assert "b" not in run.inputs


def test_a_pass_output_over_the_cap_fails_before_the_write(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_OUTPUT_BYTES", 1000)
    run = Run({"Name": "big", "Pass": {}, "Output": "{% $pad('', 2000, 'x') %}"})
    outcome = run.run({})
    step = outcome.steps["big"]
    assert step.status is StepStatus.FAILED
    assert step.error is not None and "the limit is 1000" in step.error.message
    assert outcome.status is WorkflowStatus.COMPENSATED


def test_assign_sets_variables_its_descendants_read_directly_or_through_others() -> None:
    run = Run(
        _task(
            "quote",
            Assign={"total": "{% $states.result.amount %}", "currency": "EUR"},
            Output="{% $states.result.id %}",
        ),
        {"Name": "note", "Pass": {"Result": 1}, "DependsOn": ["quote"], "Assign": {"tag": "n"}},
        _task(
            "charge",
            "note",
            Arguments={"due": "{% $total * 2 %}", "cur": "{% $currency %}", "tag": "{% $tag %}"},
        ),
        returns={"quote": {"amount": 21, "id": "q-1"}},
    )
    outcome = run.run({})
    assert outcome.status is WorkflowStatus.SUCCEEDED
    # Assign read the result as returned (its amount), while Output kept only the id.
    assert outcome.steps["quote"].output == "q-1"
    assert run.inputs["charge"] == [{"due": 42, "cur": "EUR", "tag": "n"}]
    loaded = run.engine.engine.scheduler.load(outcome.workflow_id)
    assert loaded is not None
    assert loaded[0].steps["quote"].variables == '{"currency":"EUR","total":21}'
    view = workflow_view(*loaded, run.engine.engine.ports.payloads)
    shown = {s.name: s.variables for s in view.steps}
    assert shown == {
        "quote": {"currency": "EUR", "total": 21},
        "note": {"tag": "n"},
        "charge": None,
    }


def test_a_failed_assign_fails_the_step_for_good() -> None:
    run = Run(_task("a", Assign={"x": "{% $states.result.missing %}"}), _task("b", "a"))
    outcome = run.run({})
    step = outcome.steps["a"]
    assert step.status is StepStatus.FAILED
    assert step.error is not None and step.error.name == "States.QueryEvaluationError"
    assert "Assign.x" in step.error.message
    assert outcome.status is WorkflowStatus.COMPENSATED


def test_variables_over_their_cap_fail_before_the_write(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_ASSIGN_BYTES", 100)
    run = Run(_task("a", Assign={"big": "{% $pad('', 200, 'x') %}"}))
    outcome = run.run({})
    step = outcome.steps["a"]
    assert step.status is StepStatus.FAILED
    assert step.error is not None and "the limit is 100" in step.error.message
