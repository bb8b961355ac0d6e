"""`POST /pools/{pool}/circuit` and the circuit in `GET /pools` (issue 26.2): operators force a
pool's breaker open or closed or give it back; everyone sees its state and history."""

from __future__ import annotations

import json

import pytest
from aws_stack import ALICE, BOB, Stack
from shepherd.settings import ENV_OPERATORS, ENV_POOL_POLICIES

BREAKER = {
    "FailureRatio": 0.5,
    "MinimumAttempts": 5,
    "WindowSeconds": 60,
    "CooldownSeconds": 30,
    "ProbeAttempts": 1,
}


@pytest.fixture
def guarded(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Stack:
    from shepherd_handlers import runtime

    monkeypatch.setenv(ENV_OPERATORS, ALICE)
    monkeypatch.setenv(ENV_POOL_POLICIES, json.dumps({"inventory": {"CircuitBreaker": BREAKER}}))
    runtime.engine.cache_clear()
    return stack


def test_an_operator_forces_the_circuit_and_everyone_sees_it(guarded: Stack) -> None:
    pools = {p["name"]: p for p in guarded.api("GET", "/pools")[2]["items"]}
    assert pools["inventory"]["circuit"] == {
        "state": "closed",
        "since": None,
        "mode": "auto",
        "history": [],
    }
    assert pools["payments"].get("circuit") is None  # no breaker declared
    status, _, pool = guarded.api("POST", "/pools/inventory/circuit", body={"action": "open"})
    assert status == 200 and pool["circuit"]["state"] == "open" and pool["paused"] is True
    assert pool["circuit"]["mode"] == "open"
    assert pool["circuit"]["history"][0]["to"] == "open"
    seen = {p["name"]: p for p in guarded.api("GET", "/pools", caller=BOB)[2]["items"]}
    assert seen["inventory"]["circuit"]["state"] == "open"
    status, _, pool = guarded.api("POST", "/pools/inventory/circuit", body={"action": "close"})
    assert status == 200 and pool["circuit"]["state"] == "closed" and pool["paused"] is False
    status, _, pool = guarded.api("POST", "/pools/inventory/circuit", body={"action": "auto"})
    assert status == 200 and pool["circuit"]["mode"] == "auto"


@pytest.mark.parametrize(
    ("path", "body", "caller", "status", "code"),
    [
        ("/pools/inventory/circuit", {"action": "open"}, BOB, 403, "OperatorOnly"),
        ("/pools/inventory/circuit", {"action": "flip"}, ALICE, 400, "ValidationError"),
        ("/pools/inventory/circuit", {}, ALICE, 400, "ValidationError"),
        ("/pools/payments/circuit", {"action": "open"}, ALICE, 400, "NoCircuitBreaker"),
        ("/pools/no-such-pool/circuit", {"action": "open"}, ALICE, 404, "PoolNotFound"),
    ],
)
def test_bad_circuit_requests_are_clear_errors_and_change_nothing(
    guarded: Stack, path: str, body: dict[str, str], caller: str, status: int, code: str
) -> None:
    got, _, reply = guarded.api("POST", path, body=body, caller=caller)
    assert got == status and reply["error"]["code"] == code
    pools = {p["name"]: p for p in guarded.api("GET", "/pools")[2]["items"]}
    assert pools["inventory"]["circuit"]["state"] == "closed"


def test_the_scheduled_run_emits_each_breakers_state_as_a_metric(
    guarded: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    def emitted() -> list[dict[str, object]]:
        lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
        return [x for x in lines if "PoolCircuitOpen" in x]

    capsys.readouterr()
    guarded.sweep()
    (closed,) = emitted()
    assert closed["Pool"] == "inventory" and closed["PoolCircuitOpen"] == [0.0]
    assert guarded.api("POST", "/pools/inventory/circuit", body={"action": "open"})[0] == 200
    capsys.readouterr()
    guarded.sweep()
    (opened,) = emitted()
    assert opened["Pool"] == "inventory" and opened["PoolCircuitOpen"] == [1.0]
