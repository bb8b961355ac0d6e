"""Pools are retired, not deleted: a pool no definition names any more stays deployed (and the
runtime still finds its queue) until the operator releases it; every synth warns about it, and
a pool's queues are retained even when it leaves the template."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Annotations, Match, Template
from infra_support import agent_package, render
from shepherd.settings import ENV_RETIRED_POOLS, Settings
from shepherd_infra import AgentCode, Shepherd
from shepherd_infra.ledger import LEDGER_FILE

TWO_POOLS = """\
Name: trip
Steps:
  - Name: book
    Agent: book
    Pool: travel
    TimeoutSeconds: 30
  - Name: render
    DependsOn: [book]
    Agent: render_ticket
    Pool: {second}
    TimeoutSeconds: 60
"""


def _synth(base: Path, second: str, **props: Any) -> tuple[Stack, dict[str, Any]]:
    """The trip definition with its second step in pool `second`, the ledger beside it."""
    definitions = base / "flows"
    definitions.mkdir(parents=True, exist_ok=True)
    (definitions / "trip.yaml").write_text(TWO_POOLS.format(second=second))
    src = agent_package(base / "src", "trip_agents", definitions) / "trip_agents"
    app = App(outdir=str(base / f"cdk.out-{second}-{len(list(base.iterdir()))}"))
    stack = Stack(app, "Trips")
    Shepherd(
        stack,
        "Shepherd",
        definitions_dir=definitions,
        agents=AgentCode(path=src.parent, modules=["trip_agents"]),
        pool_ledger=definitions / LEDGER_FILE,
        **props,
    )
    return stack, Template.from_stack(stack).to_json()


def _pools(template: dict[str, Any]) -> set[str]:
    return {
        r["Properties"]["Environment"]["Variables"]["SHEPHERD_POOL"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and "SHEPHERD_POOL" in r["Properties"]["Environment"]["Variables"]
    }


def _queue_names(template: dict[str, Any]) -> set[str]:
    return {
        render(r["Properties"]["QueueName"])
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SQS::Queue" and "QueueName" in r["Properties"]
    }


def _warnings(stack: Stack, text: str) -> list[Any]:
    return list(
        Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(f".*{text}.*"))
    )


@dataclass(frozen=True)
class Renamed:
    """One pool's history, synthesized once for the module (issue 36): the trip deployed with
    its second step in `heavy` (`before`, a fresh ledger), then moved to `render` (`after`,
    `stack`). The ledger as each synth left it is copied to `flows_after_heavy` and to `base`'s
    `flows`, so a test continues either history in a directory of its own."""

    base: Path
    flows_after_heavy: Path
    before: dict[str, Any]
    stack: Stack
    after: dict[str, Any]


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory) -> Renamed:
    base = tmp_path_factory.mktemp("renamed")
    _, before = _synth(base, "heavy")
    after_heavy = tmp_path_factory.mktemp("after-heavy") / "flows"
    shutil.copytree(base / "flows", after_heavy)
    stack, after = _synth(base, "render")  # the step moved to a pool of a new name
    return Renamed(base, after_heavy, before, stack, after)


def _continue(flows: Path, base: Path) -> None:
    """A copy of a history's definitions and ledger in `base`, to synthesize from."""
    shutil.copytree(flows, base / "flows")


def test_a_renamed_pool_is_retired_and_stays_deployed(renamed: Renamed) -> None:
    before, stack, after = renamed.before, renamed.stack, renamed.after
    assert _pools(before) == {"travel", "heavy"}
    assert _pools(after) == {"travel", "heavy", "render"}  # heavy: retired, not deleted
    assert _queue_names(before) <= _queue_names(after)  # the same queues, the same names
    (warning,) = _warnings(stack, "Pool 'heavy' is retired")
    assert "release_pools=['heavy']" in str(warning.entry.data)
    # Every function may still send there: the runtime derives the retired pool's queue URL.
    for resource in after["Resources"].values():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        env = {k: render(v) for k, v in resource["Properties"]["Environment"]["Variables"].items()}
        assert env[ENV_RETIRED_POOLS] == "heavy"
        urls = Settings.from_env(env).queue_urls_for(["travel", "render"])
        assert urls["heavy"].rsplit("/", 1)[1] in _queue_names(after)
    ledger = json.loads((renamed.base / "flows" / LEDGER_FILE).read_text())
    assert ledger["pools"]["heavy"]["retired"] is True
    assert ledger["pools"]["heavy"]["longest_task_seconds"] == 60  # its function as it was


def test_a_released_pool_leaves_the_stack_and_its_queues_are_kept(
    tmp_path: Path, renamed: Renamed
) -> None:
    _continue(renamed.base / "flows", tmp_path)  # heavy, then render: heavy retired
    stack, released = _synth(tmp_path, "render", release_pools=["heavy"])
    assert _pools(released) == {"travel", "render"}
    assert _warnings(stack, "Pool 'heavy' is released")
    assert not _warnings(stack, "is retired")
    assert "heavy" not in json.loads((tmp_path / "flows" / LEDGER_FILE).read_text())["pools"]


def test_every_pool_queue_is_retained_when_it_leaves_the_template(
    tmp_path: Path, renamed: Renamed
) -> None:
    kept = renamed.before
    _, dropped = _synth(tmp_path / "throwaway", "heavy", retain_data=False)
    for template, policy in ((kept, "Retain"), (dropped, "Delete")):
        queues = [
            r
            for r in template["Resources"].values()
            if r["Type"] == "AWS::SQS::Queue" and "QueueName" in r["Properties"]
        ]
        assert len(queues) == 4
        for queue in queues:
            assert queue["DeletionPolicy"] == queue["UpdateReplacePolicy"] == policy


def test_releasing_a_pool_that_is_not_retired_is_refused(tmp_path: Path, renamed: Renamed) -> None:
    _continue(renamed.flows_after_heavy, tmp_path)  # heavy deployed, still named
    with pytest.raises(ValueError, match=r"release_pools names \['heavy'\].*still named"):
        _synth(tmp_path, "heavy", release_pools=["heavy"])


def test_a_damaged_ledger_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / LEDGER_FILE).write_text('{"pools": {"x": {}}}')
    with pytest.raises(ValueError, match=r"not a pool ledger.*restore it from version control"):
        _synth(tmp_path, "heavy")
