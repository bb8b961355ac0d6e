"""The README's idle bill is the one computed from the synthesized template (issue 35 point 4):
the example app as deployed by default, and one pool (`shepherd_bench.idle_bill`)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from infra_support import synthesize
from shepherd.definitions import load_directory
from shepherd_bench import idle, idle_bill
from shepherd_infra import config

README = config.REPO_ROOT / "README.md"


def _bill(outdir: Path, definitions_dir: Path | None = None) -> dict[str, dict[str, float]]:
    synth = synthesize(outdir, definitions_dir=definitions_dir, context={})
    definitions = load_directory(definitions_dir or config.DEFINITIONS_DIR)
    return idle_bill.monthly(idle_bill.from_template(synth.tpl, definitions))


@pytest.fixture(scope="module")
def bills(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, float]]]:
    one = tmp_path_factory.mktemp("one-pool")
    shutil.copy(config.DEFINITIONS_DIR / idle.ONE_POOL_DEFINITION, one)
    return {
        "example": _bill(tmp_path_factory.mktemp("cdk-out-idle")),
        "one pool": _bill(tmp_path_factory.mktemp("cdk-out-one"), one),
    }


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("**What an idle stack costs.**")
    return " ".join(text[start : text.index("The paid extras are opt-in", start)].split())


def test_the_readme_quotes_the_computed_idle_bill(
    bills: dict[str, dict[str, dict[str, float]]],
) -> None:
    section = _section()
    example, one = (idle_bill.total(bills[k]) for k in ("example", "one pool"))
    assert f"the example app idles at **${example:.2f}** a month" in section, example
    assert f"one pool at **${one:.2f}**" in section, one
    alarms = bills["example"]["cloudwatch_alarm_metrics"]
    assert f"{alarms['units']:.0f} alarm metrics (${alarms['usd']:.2f})" in section
    assert f"(${bills['example']['idle_event_source_polls']['usd']:.2f}, a third-party" in section
    fired = bills["example"]["scheduled_firings"]["units"]
    assert f"{fired:,.0f} `provision_environment` workflows a month" in section
    parts = {
        "the supervisor's scheduled run, once a minute (${:.2f}": idle_bill.RUN_ITEMS,
        "at most ${:.2f}, and": idle_bill.WORKFLOW_ITEMS,
        "keeps the supervisor awake, ${:.2f})": idle_bill.AWAKE_ITEMS,
    }
    for words, items in parts.items():
        assert words.format(idle_bill.total(bills["example"], items)) in section, words


def test_one_pool_is_within_its_target_and_the_example_is_said_as_it_is(
    bills: dict[str, dict[str, dict[str, float]]],
) -> None:
    """Issue 35's targets: one pool <= $3 (holds); the example <= $5 (the README says whether
    it holds, and it must say so truly)."""
    assert idle_bill.total(bills["one pool"]) <= idle_bill.TARGETS["one pool"]
    example = idle_bill.total(bills["example"])
    misses = re.search(r"The example misses the \$5 target", _section()) is not None
    assert misses == (round(example, 2) > idle_bill.TARGETS["default"])


def test_no_tick_is_billed_while_the_index_is_empty(
    bills: dict[str, dict[str, dict[str, float]]],
) -> None:
    """The one-pool stack has no schedule: its supervisor is asleep all month (one run a
    minute, no tick), because the functions that start workflows can wake it."""
    one = bills["one pool"]
    assert idle_bill.invocations(one) == 43_800
    assert one["supervisor_tick_requests"]["units"] == 0
