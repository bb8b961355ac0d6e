"""docs/api.md and the code agree on every status code: each route's success, and each error
code's status (a doc that says 200 where the handler answers 202 misleads every client). The
README's figures agree with what was measured: its prices, its comparison with the other engines
and its demo time come from docs/benchmarks.json, its limits from shepherd.limits."""

from __future__ import annotations

import json
import math
import re
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from shepherd_cli.openapi import render

ROOT = Path(__file__).resolve().parents[2]
API_MD = ROOT / "docs" / "api.md"
README = (ROOT / "README.md").read_text(encoding="utf-8")
BENCH = json.loads((ROOT / "docs" / "benchmarks.json").read_text(encoding="utf-8"))
ROUTE_CELL = re.compile(r"`(GET|POST|PUT|DELETE|PATCH) (/[^`?\s]*)")


def _table(heading: str) -> list[list[str]]:
    """The rows of the first table under `heading`, as cells."""
    text = API_MD.read_text()
    section = text[text.index(heading) :]
    rows: list[list[str]] = []
    for line in section.splitlines()[1:]:
        if line.startswith("## ") and rows:
            break
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in line.strip("|").split(" | ")])
        elif rows and not line.startswith("|"):
            break
    return rows[1:]  # without the header row


def _shape(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def _documented_routes() -> dict[tuple[str, str], int]:
    """(method, path shape) -> the status api.md gives: the success, or for a deprecated route
    the one error it answers with. `a|b|c` in a path cell is three routes."""
    out: dict[tuple[str, str], int] = {}
    for cells in _table("## Routes"):
        status = re.search(r"\b([234]\d\d)\b", cells[-1])
        assert status, cells
        for method, path in ROUTE_CELL.findall(cells[0].replace("\\|", "|")):
            head, _, tail = path.rpartition("/")
            for last in tail.split("|"):
                out[(method, _shape(f"{head}/{last}"))] = int(status.group(1))
    return out


def test_every_route_succeeds_with_the_status_the_docs_give() -> None:
    documented = _documented_routes()
    served = {}
    for path, operations in json.loads(render())["paths"].items():
        for method, operation in operations.items():
            success = [int(code) for code in operation["responses"] if code.startswith("2")]
            # A route with no success (a deprecated one) is known by the 410 it answers with.
            gone = [410] if "410" in operation["responses"] else []
            served[(method.upper(), _shape(path))] = success or gone
    assert set(documented) == set(served), set(documented) ^ set(served)
    for route, status in documented.items():
        assert served[route] == [status], f"{route}: docs say {status}, code says {served[route]}"


def _documented_errors() -> set[tuple[int, str]]:
    out: set[tuple[int, str]] = set()
    for cells in _table("## Errors"):
        statuses = re.findall(r"`(\d\d\d)`", cells[0])
        codes = re.findall(r"`([A-Za-z]+)`", cells[1])
        out.update((int(s), c) for s in statuses for c in codes)
    return out


def _translated() -> set[tuple[int, str]]:
    """Every (status, code) the handlers' one translation table gives a domain error."""
    from shepherd_handlers import errors

    fixed = {(int(status), code) for status, code, _ in errors._BY_TYPE.values()}
    uploads = {(int(status), cls.__name__) for cls, status in errors._UPLOADS.items()}
    explicit = {
        (int(HTTPStatus.SERVICE_UNAVAILABLE), "StoreUnavailable"),
        (int(HTTPStatus.TOO_MANY_REQUESTS), "HeartbeatTooSoon"),
        (int(HTTPStatus.BAD_REQUEST), "DuplicateKey"),
        (int(HTTPStatus.BAD_REQUEST), "InvalidJson"),
    }
    return fixed | uploads | explicit


@pytest.mark.parametrize("pair", sorted(_translated()), ids=lambda p: f"{p[0]}-{p[1]}")
def test_every_error_code_has_the_status_the_docs_give(pair: tuple[int, str]) -> None:
    documented = _documented_errors()
    status, code = pair
    same_code = sorted(s for s, c in documented if c == code)
    assert (status, code) in documented, f"{code}: code says {status}, docs say {same_code}"


# ------------------------------------------------------------------ the README's figures


def _scenario(name: str) -> dict[str, Any]:
    return next(s for s in BENCH["cost"]["scenarios"] if s["scenario"] == name)


CLEAN = ("order clean", "provision clean")


def _ours(name: str) -> float:
    """A clean example's modelled price per million steps, events out included."""
    return float(_scenario(name)["worst"]["usd_per_million_steps"]["core_and_events"])


def test_the_comparison_table_quotes_the_measured_and_the_list_prices() -> None:
    row = next(line for line in README.splitlines() if line.startswith("| price per million steps"))
    low, high = sorted(_ours(n) for n in CLEAN)
    assert f"**${low:.2f}\N{EN DASH}{high:.2f}**" in row, row
    sfn = sorted(_scenario(n)["step_functions"]["standard_usd_per_million_steps"] for n in CLEAN)
    per_transition = BENCH["others"]["step_functions_standard"]["usd_per_million_transitions"]
    assert (
        f"**${sfn[0]:g}\N{EN DASH}{sfn[-1]:g}** (${per_transition:g} per million transitions)"
        in row
    )
    temporal = BENCH["others"]["temporal_cloud"]
    per_step = temporal["actions_per_step"]
    developer = temporal["usd_per_million_actions"] * per_step
    volume = temporal["usd_per_million_actions_at_volume"] * per_step
    assert (
        f"**${developer:g}** (${temporal['usd_per_million_actions']:g} per million Actions; "
        f"**${volume:.2f}** at volume)"
    ) in row
    inngest = BENCH["others"]["inngest"]
    steps = inngest["pro_included_executions"] / inngest["executions_per_step"] / 1e6
    assert f"**${inngest['pro_usd_per_month']:g} a month** covers about {steps:.2f} million" in row


def test_the_cost_figures_in_prose_are_the_measured_ones() -> None:
    low, high = sorted(_ours(n) for n in CLEAN)
    assert f"${low:.1f}-{high:.1f} per million steps with events out" in README
    ratios = [_scenario(n)["step_functions"]["ratio_standard_to_ours"] for n in CLEAN]
    span = f"{math.floor(min(ratios))}-{math.ceil(max(ratios))}x"
    assert f"{span} below Step Functions Standard" in README
    assert f"about {span} below Step Functions Standard" in README
    order, provision = (_ours(n) for n in CLEAN)
    assert f"${order:.2f} (order) and ${provision:.2f} (provision) per million steps" in README


def _numbers(tree: Any) -> set[float]:
    if isinstance(tree, dict):
        return set().union(*(_numbers(v) for v in tree.values())) if tree else set()
    if isinstance(tree, list):
        return set().union(*(_numbers(v) for v in tree)) if tree else set()
    if isinstance(tree, (int, float)) and not isinstance(tree, bool):
        return {float(tree)}
    return set()


def _derived() -> set[float]:
    """Figures made of benchmarks.json's: a month's fixed costs summed, the other engines'
    prices per step."""
    costs = BENCH["cost"]
    sums = {
        sum(item["usd"] for item in costs[key].values() if isinstance(item, dict))
        for key in ("fixed_monthly", "fixed_monthly_one_pool", "fixed_monthly_all_options")
    }
    temporal = BENCH["others"]["temporal_cloud"]
    per_step = {
        temporal[k] * temporal["actions_per_step"]
        for k in ("usd_per_million_actions", "usd_per_million_actions_at_volume")
    }
    # What one more pool adds to the idle bill: its queue's share of the idle polling (the
    # example's polling over the one-pool stack's, per pool between them) and two alarm metrics.
    example, one = costs["fixed_monthly"], costs["fixed_monthly_one_pool"]
    polls = "idle_event_source_polls"
    per_pool = {
        (example[polls]["usd"] - one[polls]["usd"]) / (costs["pools"] - 1),
        2
        * example["cloudwatch_alarm_metrics"]["usd"]
        / example["cloudwatch_alarm_metrics"]["units"],
    }
    return sums | per_step | per_pool


def test_every_dollar_figure_is_a_measured_one() -> None:
    """A `$` figure in the README is one of benchmarks.json's (or made of them) at the precision
    it is written with: a price nobody measured cannot slip in."""
    known = _numbers(BENCH) | _derived()
    unknown = []
    for found in re.finditer(r"\$(\d[\d,]*(?:\.\d+)?)", README):
        text = found.group(1).replace(",", "")
        places = len(text.split(".")[1]) if "." in text else 0
        if not any(round(n, places) == float(text) for n in known):
            unknown.append(README[max(0, found.start() - 50) : found.end() + 20].replace("\n", " "))
    assert not unknown, unknown


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def test_the_demo_time_is_the_measured_one() -> None:
    """The README once promised "about a minute" for a demo that took four on a busy machine:
    it says what the last measured passing run took, and on what, and what an overloaded
    machine did to it."""
    demo = BENCH["demo"]
    run = next(r for r in demo["runs"] if r["exit"] == 0)
    said = f"{_duration(run['seconds'])} on {demo['cores']} cores with {demo['hogs']} CPU hogs"
    assert README.count(said) == 2, said
    overloaded = demo["overloaded"]
    assert overloaded["runs"][0]["exit"] != 0
    load = overloaded["load_average_1min"]["end"]
    assert f"(a 1-minute load of {load:g}) a request\npassed API Gateway's 29 s" in README
    assert "about a minute" not in README


def test_the_limits_quoted_are_the_engines() -> None:
    from shepherd import limits

    mib = 1024 * 1024
    assert (
        f"A start takes {limits.MAX_INPUT_BYTES // mib} MiB\n  inline or up to "
        f"{limits.MAX_UPLOAD_BYTES // mib} MiB"
    ) in README
    assert f"Inputs and outputs over {limits.PAYLOAD_INLINE_BYTES // 1024} KiB" in README
    assert f"outputs up to {limits.MAX_OUTPUT_BYTES // mib} MiB" in README


def test_the_readme_reads_in_a_newcomers_order() -> None:
    """What it is, why choose it, the two commands (the first shown: CI runs `make test`), then
    how to use it in one's own project, then the rest."""
    headings = re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
    assert headings[:3] == ["Why choose Shepherd", "Try it", "Use Shepherd in your own project"]
    first_block = README[README.index("```bash\n") :].split("```", 2)[1]
    assert [line.split("#")[0].strip() for line in first_block.splitlines()[1:3]] == [
        "make demo",
        "make test",
    ]
    assert "](docs/tutorial.md)" in README.split("## Use Shepherd in your own project")[1][:400]


def test_the_dependency_ranges_quoted_are_pyprojects() -> None:
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    ranges = {re.sub(r"\[.*\]", "", d) for d in pyproject["project"]["dependencies"]}
    quoted = re.findall(r"`((?:boto3|aws-lambda-powertools|pydantic)>=[^`]+)`", README)
    assert quoted and set(quoted) <= ranges, (quoted, ranges)


def test_the_state_machine_price_in_the_readme_is_the_measured_one() -> None:
    """The ASL mix's price per transition (issue 42, `make bench-asl`), quoted as measured."""
    mix = BENCH["asl"]["mix"]["mix"]
    ours = mix["usd_per_million_transitions"]
    standard = mix["step_functions_standard_usd_per_million_transitions"]
    text = " ".join(README.split())
    assert (
        f"costs ${ours:.2f} per million state transitions against Standard's ${standard:g}" in text
    )
    # It says whether the target (a fifth of Standard's) is met, as the numbers say.
    assert ("not yet the fifth of it" in text) is (ours > standard / 5)


def test_the_migrating_guides_prices_per_execution_are_the_measured_ones() -> None:
    """Issue 38's three machines (`make bench-asl`): each quoted in the migrating guide as
    measured, ours beside Step Functions Standard's and Express's."""
    from shepherd_bench.asl import per_execution

    guide = (ROOT / "docs" / "migrating-from-step-functions.md").read_text(encoding="utf-8")
    rows = per_execution(BENCH["asl"])
    assert [r["machine"] for r in rows] == [
        "bench_asl_chain",
        "bench_asl_service_map",
        "bench_asl_callback",
    ]
    for row in rows:
        line = next(x for x in guide.splitlines() if f"(`{row['machine']}`" in x)
        express = row["express_usd_per_million_executions"]
        cells = [c.strip() for c in line.strip("|").split("|")][1:]
        assert cells[:3] == [
            f"${row['usd_per_million_executions']:.2f}",
            f"${row['standard_usd_per_million_executions']:.2f}",
            f"${express:.2f}" if express is not None else cells[2],
        ], line
        assert (express is None) is cells[2].startswith("n/a"), line
    # The README quotes them too.
    text = " ".join(README.split())
    quoted = re.findall(
        r"\$([0-9.]+)(?: per million)? against (?:Standard's )?\$([0-9]+(?:\.[0-9]+)?)",
        text.split("Per execution,")[1],
    )
    assert quoted[:3] == [
        (f"{r['usd_per_million_executions']:.2f}", f"{r['standard_usd_per_million_executions']:g}")
        for r in rows
    ]
