"""`make demo`: run the example workflows, some with injected faults, and show what happened.

This version runs the whole engine in one process against moto: the real scheduler, agent
runtime and supervisor, the real DynamoDB and SQS adapters, a poller standing in for the SQS
event source mapping, and a supervisor sweep every half second.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TABLE = "shepherd-demo"
TIME_LIMIT_SECONDS = 90
SWEEP_EVERY_SECONDS = 0.5


@dataclass
class Running:
    label: str
    workflow_id: str
    expected: str
    started: float
    finished: float | None = None


def _set_fake_aws_env() -> None:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "demo",
        "AWS_SECRET_ACCESS_KEY": "demo",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(key, value)
    os.environ.pop("AWS_PROFILE", None)


def main() -> int:
    _set_fake_aws_env()
    import boto3
    from moto import mock_aws
    from shepherd.definitions import check_agents, load_directory
    from shepherd.model import TaskMessage
    from shepherd.settings import Settings
    from shepherd.wiring import Shepherd
    from shepherd_agents import registry
    from shepherd_agents.faults import SimulatedCrash, SimulatedHang

    from shepherd_cli import report
    from shepherd_cli.resources import create_all
    from shepherd_cli.scenarios import SCENARIOS

    definitions = load_directory(ROOT / "statemachines")
    for name, definition in definitions.items():
        check_agents(definition, registry.names(), name)

    with mock_aws():
        clients = {s: boto3.client(s) for s in ("dynamodb", "sqs", "events")}
        queues = create_all(clients, definitions, table=TABLE, bus=None)
        settings = Settings(
            table=TABLE,
            queue_urls={p: q.url for p, q in queues.items()},
            definitions_dir=ROOT / "statemachines",
            watch_shards=4,
        )
        engine = Shepherd(settings, agents=registry, worker_id="demo-worker")
        engine.agent_runtime.background_heartbeats = False  # single-threaded demo loop
        print(
            f"{report.BOLD}Shepherd demo{report.RESET}: {len(SCENARIOS)} workflows, in-process on moto"
        )
        print(
            f"{report.DIM}pools: {', '.join(queues)}; supervisor sweeps every {SWEEP_EVERY_SECONDS}s{report.RESET}\n"
        )

        t0 = time.monotonic()
        running = []
        for s in SCENARIOS:
            result = engine.scheduler.start(
                s.wf_type, s.payload, idempotency_key=s.label, owner="demo"
            )
            running.append(Running(s.label, result.workflow_id, s.expected, time.monotonic()))
            print(f"  started {s.label:<22} {report.DIM}{s.story}{report.RESET}")
        print()

        stuck: set[str] = set()
        last_sweep = 0.0
        while time.monotonic() - t0 < TIME_LIMIT_SECONDS:
            for pool, q in queues.items():
                got = clients["sqs"].receive_message(
                    QueueUrl=q.url, MaxNumberOfMessages=10, WaitTimeSeconds=0
                )
                for m in got.get("Messages", []):
                    task = TaskMessage.from_body(m["Body"])
                    try:
                        engine.agent_runtime.handle(task)
                    except (SimulatedHang, SimulatedCrash) as fault:
                        # The worker is stuck or gone: no result, no heartbeat, message kept.
                        kind = "hung" if isinstance(fault, SimulatedHang) else "crashed"
                        stuck.add(m["MessageId"])
                        _say(t0, f"{task.step} attempt {task.attempt} {kind} (worker for {pool})")
                        continue
                    clients["sqs"].delete_message(QueueUrl=q.url, ReceiptHandle=m["ReceiptHandle"])
            if time.monotonic() - last_sweep >= SWEEP_EVERY_SECONDS:
                last_sweep = time.monotonic()
                swept = engine.supervisor.sweep()
                for action, n in sorted(swept.actions.items()):
                    if not action.endswith("Lost") and action not in ("Cancel",):
                        _say(t0, f"supervisor: {action} x{n}")
            _mark_finished(engine, running, t0)
            if all(r.finished for r in running):
                break
            time.sleep(0.02)

        states = {r.label: engine.scheduler.load(r.workflow_id)[0] for r in running}  # type: ignore[index]
        print()
        for r in running:
            print("\n".join(report.detail(r.label, states[r.label], r.expected)))
        print()
        rows = [
            (r.label, states[r.label], r.expected, (r.finished or time.monotonic()) - r.started)
            for r in running
        ]
        print("\n".join(report.summary(rows)))
        ok = all(states[r.label].workflow.status.value == r.expected for r in running)
        elapsed = time.monotonic() - t0
        verdict = (
            f"{report.GREEN}every workflow ended as expected{report.RESET}"
            if ok
            else f"{report.RED}some workflows did not end as expected{report.RESET}"
        )
        print(f"\n{verdict} in {elapsed:.1f}s")
        return 0 if ok else 1


def _say(t0: float, text: str) -> None:
    print(f"  [{time.monotonic() - t0:5.1f}s] {text}")


def _mark_finished(engine: Any, running: list[Running], t0: float) -> None:
    for r in running:
        if r.finished:
            continue
        loaded = engine.scheduler.load(r.workflow_id)
        if loaded and loaded[0].workflow.status.terminal:
            r.finished = time.monotonic()
            _say(t0, f"{r.label} -> {loaded[0].workflow.status.value}")


if __name__ == "__main__":
    sys.exit(main())
