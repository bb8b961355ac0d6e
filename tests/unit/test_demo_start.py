"""`make demo` as a newcomer meets it: ports can be chosen, a stack that cannot start on a busy
machine is a sentence (and is waited for longer there), and a carrier answering too late reads
as what it is, not as a failure."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from shepherd_cli import demo, local
from shepherd_cli.client import ApiError

ROOT = Path(__file__).resolve().parents[2]


def test_make_demo_passes_the_ports_through() -> None:
    make = shutil.which("make") or "make"
    done = subprocess.run(
        [make, "-n", "demo", "PORT=8090", "MOTO_PORT=5001", "CONSOLE_PORT=8091"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(x for x in done.stdout.splitlines() if "shepherd_cli.demo" in x)
    assert line.endswith("--port 8090 --moto-port 5001 --console-port 8091"), line
    plain = subprocess.run(
        [make, "-n", "demo"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "--port" not in next(x for x in plain.splitlines() if "shepherd_cli.demo" in x)


def test_the_startup_wait_grows_with_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHEPHERD_STARTUP_SECONDS", raising=False)
    assert local.startup_seconds(load=0.5, cores=2) == local.STARTUP_SECONDS
    assert local.startup_seconds(load=6.0, cores=2) == 3 * local.STARTUP_SECONDS
    assert local.startup_seconds(load=100.0, cores=2) == local.STARTUP_MAX_SECONDS
    monkeypatch.setenv("SHEPHERD_STARTUP_SECONDS", "900")
    assert local.startup_seconds(load=0.0, cores=2) == 900


def test_a_stack_that_does_not_come_up_is_a_sentence_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = local.free_port()  # nothing listens there

    def start(self: local.LocalStack) -> None:
        local._wait_http(
            f"http://127.0.0.1:{port}/definitions",
            0.3,
            what="the local API",
            log=Path(".shepherd/logs/control.log"),
        )

    monkeypatch.setattr(local.LocalStack, "start", start)
    monkeypatch.setattr(local.LocalStack, "stop", lambda self: None)
    assert demo.run([]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "the demo could not start the local stack" in err
    assert "the local API did not answer within 0 s" in err
    assert "SHEPHERD_STARTUP_SECONDS=" in err and "control.log" in err


def test_an_exited_process_is_not_waited_for() -> None:
    port = local.free_port()
    with pytest.raises(local.StartupTimeout, match=r"moto exited while starting; its log: m\.log"):
        local._wait_http(
            f"http://127.0.0.1:{port}/", 60, what="moto", log=Path("m.log"), alive=lambda: False
        )


def test_a_carrier_answering_a_timed_out_attempt_is_explained() -> None:
    stale = ApiError(409, "TaskTokenStale", "the task is over", "token")
    note = demo.carrier_refused(stale)
    assert "409" not in note and "timed out" in note and "answers the retry" in note
    other = ApiError(400, "InvalidInput", "bad output")
    assert (
        demo.carrier_refused(other)
        == "the carrier's answer was refused: 400 InvalidInput: bad output"
    )


def test_a_stack_that_cannot_keep_up_is_a_sentence_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under a 1-minute load of 25 on 2 cores a request passed API Gateway's 29 s mid-demo."""

    def main(argv: list[str] | None = None) -> int:
        raise ApiError(504, "IntegrationTimeout", "the handler timed out")

    monkeypatch.setattr(demo, "main", main)
    assert demo.run([]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "the local stack did not keep up" in err
    assert "504 IntegrationTimeout: the handler timed out" in err and "try again" in err


class _Stub:
    """A stack or console that starts nothing: entered and left, with what the demo reads."""

    entered: list[str] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.kwargs = kwargs
        self.api_url = self.url = "http://127.0.0.1:1"
        self.restarts = 0

    def __enter__(self) -> _Stub:
        _Stub.entered.append(type(self).__name__)
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def pids(self) -> list[int]:
        return []


class _Stack(_Stub):
    pass


class _Console(_Stub):
    pass


@pytest.mark.parametrize(
    ("argv", "phases", "anchored"),
    [
        ([], ["workflows", "outage"], True),
        (["--only", "workflows"], ["workflows"], True),
        (["--only", "outage"], ["warm-up", "outage"], False),
    ],
)
def test_make_demo_runs_both_phases_in_order_on_one_stack(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], phases: list[str], anchored: bool
) -> None:
    """`make demo` runs the workflows, then the outage, on the same stack (the suite runs each
    phase alone: tests/e2e/test_demo.py); `--only` runs one (the outage after a clean order
    has warmed its stack up), and the schedule is brought forward only where its firing is
    looked for."""
    ran: list[tuple[str, object]] = []
    stacks: list[_Stack] = []

    def stack(*args: object, **kwargs: object) -> _Stack:
        stacks.append(_Stack(*args, **kwargs))
        return stacks[-1]

    def workflows(api: object, on: object) -> tuple[list[object], object]:
        ran.append(("workflows", on))
        return [], object()

    def warm_up(api: object, on: object) -> list[object]:
        ran.append(("warm-up", on))
        return []

    def outage(api: object, on: object) -> tuple[list[object], dict[str, object], list[str]]:
        ran.append(("outage", on))
        return [], {}, []

    _Stub.entered = []
    monkeypatch.setattr(demo, "LocalStack", stack)
    monkeypatch.setattr(demo, "Console", _Console)
    monkeypatch.setattr(demo, "_workflows", workflows)
    monkeypatch.setattr(demo, "_outage", outage)
    monkeypatch.setattr(demo, "_warm_up", warm_up)
    assert demo.main(argv) == 0
    assert [name for name, _ in ran] == phases
    assert len(stacks) == 1 and all(on is stacks[0] for _, on in ran)
    assert _Stub.entered == ["_Stack", "_Console"]
    assert (stacks[0].kwargs["schedule_anchor"] is not None) is anchored


def test_make_demo_passes_only_through() -> None:
    make = shutil.which("make") or "make"
    done = subprocess.run(
        [make, "-n", "demo", "ONLY=outage"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    line = next(x for x in done.stdout.splitlines() if "shepherd_cli.demo" in x)
    assert "shepherd_cli.demo --only outage" in line, line
