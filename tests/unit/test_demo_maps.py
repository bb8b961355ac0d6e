"""`make demo`'s checks of a map scenario (shepherd_cli.demo): what it reads of the map's items
and of the example ledger, and what it calls unexpected. The demo runs them on the local
stack (tests/e2e/test_demo.py); here each check is shown to catch what it is for."""

from __future__ import annotations

from typing import Any

from shepherd_cli import demo
from shepherd_cli.scenarios import TRANSCODE_SCENARIOS

SCENARIO = {s.label: s for s in TRANSCODE_SCENARIOS}


def _item(index: int, status: str = "SUCCEEDED", attempt: int = 1, error: str | None = None):
    return {
        "index": index,
        "status": status,
        "attempt": attempt,
        "error": None if error is None else {"type": error, "message": "..."},
    }


def _tracked(label: str, items: list[dict[str, Any]], effects: dict[int, bool]) -> Any:
    scenario = SCENARIO[label]
    assert scenario.map is not None
    counts = {
        "total": 8,
        "succeeded": sum(i["status"] == "SUCCEEDED" for i in items),
        "failed": sum(i["status"] == "FAILED" for i in items),
        # The engine's count of item undos: every item claimed, when the map was unwound.
        "compensated": sum(i["attempt"] > 0 for i in items) if scenario.map.undone else 0,
        "status": scenario.map.status,
        "max_concurrency": 3,
    }
    view = {"steps": [{"name": scenario.map.step, "status": "X", "map": counts}]}
    return demo.Tracked(scenario, "wf", 0.0, view=view, items=items, effects=effects)


def _flaky(**changed: dict[str, Any]) -> list[dict[str, Any]]:
    items = [_item(i) for i in range(8)]
    items[2] = _item(2, attempt=3, error="TransientServiceError")
    items[5] = _item(5, attempt=2, error="States.HeartbeatTimeout")
    for index, fields in changed.items():
        items[int(index[1:])] |= fields
    return items


def test_the_flaky_transcode_as_promised_has_no_problem() -> None:
    t = _tracked("video-flaky-chunks", _flaky(), dict.fromkeys(range(8), False))
    assert demo._map_problems(t) == []
    # A busy machine may add an attempt that timed out: not the scenario's fault.
    late = _flaky(i2={"attempt": 4, "error": {"type": "States.HeartbeatTimeout"}})
    assert (
        demo._map_problems(_tracked("video-flaky-chunks", late, dict.fromkeys(range(8), False)))
        == []
    )


def test_an_item_short_of_its_attempts_or_with_another_error_is_unexpected() -> None:
    few = _flaky(i2={"attempt": 2})
    assert demo._map_problems(
        _tracked("video-flaky-chunks", few, dict.fromkeys(range(8), False))
    ) == ["item 2 ended SUCCEEDED after 2 attempts, expected SUCCEEDED after at least 3"]
    crashed = _flaky(i5={"error": {"type": "TransientServiceError"}})
    found = demo._map_problems(
        _tracked("video-flaky-chunks", crashed, dict.fromkeys(range(8), False))
    )
    assert found == [
        "item 5's last error is TransientServiceError, expected States.HeartbeatTimeout"
    ]


def test_an_unwound_map_must_leave_nothing_it_encoded() -> None:
    items = [_item(i) for i in range(8)]
    items[4] = _item(4, "FAILED", error="CorruptChunk")
    items[6] = _item(6, "FAILED", error="CorruptChunk")
    items[7] = _item(7, "CANCELLED", attempt=0)
    encoded = {i: True for i in (0, 1, 2, 3, 5)}  # each undone
    t = _tracked("video-corrupt-chunks", items, encoded)
    assert demo._map_problems(t) == []
    left = {**encoded, 3: False}
    found = demo._map_problems(_tracked("video-corrupt-chunks", items, left))
    assert "items [3] acted and were never undone" in found
    ghost = {**encoded, 7: True}  # an effect of an item never claimed
    found = demo._map_problems(_tracked("video-corrupt-chunks", items, ghost))
    assert "items [7] acted but were never claimed" in found
