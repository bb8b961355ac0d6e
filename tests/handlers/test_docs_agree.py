"""docs/api.md and the code agree on every status code: each route's success, and each error
code's status (a doc that says 200 where the handler answers 202 misleads every client)."""

from __future__ import annotations

import json
import re
from http import HTTPStatus
from pathlib import Path

import pytest
from shepherd_cli.openapi import render

API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"
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
