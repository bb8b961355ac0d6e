"""`shepherd status` and the demo's step lines (shepherd_cli.render): a skipped step has its
own mark, an answered approval says who decided and why, and a resting step says until when."""

from __future__ import annotations

from typing import Any

from shepherd_cli import render


def _view(*steps: dict[str, Any]) -> dict[str, Any]:
    return {
        "workflow_id": "wf-1",
        "type": "order_fulfilment",
        "status": "RUNNING",
        "created_at": "2026-01-01T00:00:00Z",
        "steps": [{"attempt": 0, "attempts": [], **s} for s in steps],
        "compensations": [],
    }


def test_skipped_decided_and_resting_steps_say_so() -> None:
    lines = render.status_lines(
        _view(
            {"name": "fraud_review", "status": "SKIPPED"},
            {
                "name": "second_review",
                "status": "FAILED",
                "attempt": 1,
                "decision": {"verdict": "rejected", "by": "ada", "comment": "card stolen"},
            },
            {
                "name": "until_reminder",
                "status": "WAITING",
                "attempt": 1,
                "wake_at": "2026-01-02T09:00:00Z",
            },
        )
    )
    skipped, decided, resting = lines[2:]
    assert skipped.strip().startswith("↷ fraud_review") and "SKIPPED" in skipped
    assert decided.rstrip().endswith("rejected by ada: card stolen")
    assert resting.rstrip().endswith("until 2026-01-02T09:00:00Z")


def test_a_map_step_shows_its_progress_and_a_child_step_its_child() -> None:
    counts = {
        "total": 40,
        "pending": 10,
        "running": 5,
        "succeeded": 23,
        "failed": 2,
        "cancelled": 0,
        "compensated": 0,
        "status": "RUNNING",
        "max_concurrency": 5,
    }
    view = _view(
        {"name": "encode", "status": "RUNNING", "attempt": 1, "map": counts},
        {"name": "region", "status": "WAITING", "attempt": 2, "children": ["c1", "c2"]},
    )
    view["parent_id"], view["parent_step"] = "wf-0", "fleet"
    lines = render.status_lines(view)
    assert lines[1].strip() == "child of wf-0 (step fleet)"
    encode, region = lines[3:]
    # 25 of 40 ended: 12 of 20 marks; the counts that are not zero, in the demo's words.
    assert encode.rstrip().endswith(
        "[############........] 23/40 items succeeded, 5 in flight, 10 to start, 2 failed"
    )
    assert region.rstrip().endswith("child c2")


def test_the_demo_note_names_a_map_items_by_where_they_are() -> None:
    counts = {"total": 8, "pending": 2, "running": 3, "succeeded": 3, "failed": 0}
    counts |= {"cancelled": 0, "compensated": 0, "status": "RUNNING", "max_concurrency": 3}
    assert render.map_progress(counts) == "3/8 items succeeded, 3 in flight, 2 to start"
    unwound = counts | {"running": 0, "pending": 0, "failed": 2, "cancelled": 3}
    unwound["compensated"] = 5
    assert render.map_progress(unwound) == ("3/8 items succeeded, 2 failed, 3 cancelled, 5 undone")


def test_the_graph_draws_every_kind_of_step_the_examples_use() -> None:
    """`shepherd graph` on the repository's own definitions: an Approval step (order_fulfilment's
    fraud review) and a Wait step are nodes like any other, not a traceback."""
    from pathlib import Path

    from shepherd.definitions import load_directory

    definitions = load_directory(Path(__file__).parents[2] / "statemachines")
    text = render.graph(definitions["order_fulfilment"])
    assert 'fraud_review["fraud_review<br/><small>approval ≤3600 s</small>"]' in text
    assert "reserve_inventory --> fraud_review" in text
    for definition in definitions.values():
        assert render.graph(definition).startswith("flowchart LR")


def test_the_graph_of_a_misspelt_type_names_the_nearest(monkeypatch: Any, capsys: Any) -> None:
    from pathlib import Path

    from shepherd_cli.main import main

    monkeypatch.chdir(Path(__file__).parents[2])
    assert main(["graph", "order_fulfilmnt"]) == 1
    assert "unknown workflow type 'order_fulfilmnt'; did you mean 'order_fulfilment'?" in (
        capsys.readouterr().err
    )
