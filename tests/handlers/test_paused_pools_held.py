"""A deploy that updates or replaces a pool's event source mapping enables it (CloudFormation
knows nothing of a pause): the supervisor's scheduled run disables the mapping of every pool the
table records as paused, so a paused pool stays paused within a minute of any deploy."""

from __future__ import annotations

import pytest
from aws_stack import LambdaContext, Stack, sqs_event
from shepherd.errors import DeliveryError


class FakeControl:
    """The pools' event source mappings: every switch asked for."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, bool]] = []
        self.fail = fail

    def set_enabled(self, pool: str, enabled: bool) -> None:
        self.calls.append((pool, enabled))
        if self.fail:
            raise DeliveryError(f"pool '{pool}': throttled")


@pytest.fixture(autouse=True)
def _as_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pausing a pool is an operator's act (issue 28 point 10): the default caller is one."""
    from aws_stack import ALICE
    from shepherd.settings import ENV_OPERATORS
    from shepherd_handlers import runtime

    monkeypatch.setenv(ENV_OPERATORS, ALICE)
    runtime.engine.cache_clear()


def _with_control(control: FakeControl) -> None:
    from shepherd_handlers import runtime

    runtime.engine().__dict__["pool_control"] = control  # as a deployment builds it


def test_the_scheduled_run_disables_the_mappings_of_paused_pools(stack: Stack) -> None:
    assert stack.api("POST", "/pools/inventory/pause")[0] == 200
    assert stack.api("POST", "/pools/payments/pause")[0] == 200
    assert stack.api("POST", "/pools/payments/resume")[0] == 200
    control = FakeControl()
    _with_control(control)
    stack.sweep()  # the scheduled run
    assert control.calls == [("inventory", False)]  # paused only; a resumed pool is left alone


def test_a_tick_holds_nothing(stack: Stack) -> None:
    from shepherd_handlers import supervisor

    assert stack.api("POST", "/pools/inventory/pause")[0] == 200
    control = FakeControl()
    _with_control(control)
    supervisor.handler(
        sqs_event([("t-1", "{}")], "arn:aws:sqs:us-east-1:123456789012:ticks"), LambdaContext()
    )
    assert control.calls == []  # once a minute is enough


def test_a_failure_to_hold_is_logged_and_the_sweep_goes_on(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    assert stack.api("POST", "/pools/inventory/pause")[0] == 200
    control = FakeControl(fail=True)
    _with_control(control)
    assert stack.sweep()["sweeps"] == 1
    assert control.calls == [("inventory", False)]
    assert "paused pool not held" in caplog.text
