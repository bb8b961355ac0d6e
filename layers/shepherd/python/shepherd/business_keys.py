"""Business keys (issue 37): a workflow's tags and its WaitForSignal steps' correlations
(`Match`), checked and turned into the index items that find them. Pure: no I/O.

Each tag and each correlation is one item in the workflow's partition (keys.py owns the
layout), carrying the sparse `by_key` index's keys: `GET /workflows?tag=k:v` reads the tag's
shards, `POST /signals` the match's (docs/architecture.md, Business keys). Every cap is checked
here, before the write the items go with (invariant 8).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from shepherd import fanout, jsonsafe, limits
from shepherd.conditions import Item
from shepherd.errors import InputInvalid, TagInvalid
from shepherd.keys import (
    key_shard,
    list_sk,
    match_item_sk,
    match_pk,
    tag_item_sk,
    tag_pk,
    wf_pk,
)
from shepherd.model import loads

_TAG_KEY = re.compile(limits.TAG_KEY)


def checked_tags(tags: Mapping[str, Any] | None) -> dict[str, str]:
    """The tags of a start as given, if within their caps; TagInvalid (400) otherwise."""
    if not tags:
        return {}
    if len(tags) > limits.MAX_TAGS:
        raise TagInvalid(f"{len(tags)} tags; a workflow carries at most {limits.MAX_TAGS}")
    for key, value in tags.items():
        check_tag(key, value)
    return dict(tags)


def check_tag(key: Any, value: Any) -> None:
    """One tag: a key of at most 64 characters of [A-Za-z0-9_./=+@-], a string value of at
    most 256 characters."""
    if not isinstance(key, str) or not _TAG_KEY.fullmatch(key):
        raise TagInvalid(
            f"tag key {key!r}: 1 to {limits.MAX_TAG_KEY_CHARS} characters of letters, digits "
            "and _ . / = + @ -"
        )
    if not isinstance(value, str) or len(value) > limits.MAX_TAG_VALUE_CHARS:
        raise TagInvalid(
            f"tag {key!r}: its value is a string of at most {limits.MAX_TAG_VALUE_CHARS} characters"
        )
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:  # a lone surrogate (an agent's ctx.tag): not Unicode text
            raise TagInvalid(f"tag {key!r}: its value holds a lone surrogate") from None


def tags_with(stored: str | None, key: str, value: Any) -> str | None:
    """A workflow's tags (as its item stores them) with `key` set to `value` (`ctx.tag`), or
    None if it carries that tag already (a repeat writes nothing). TagInvalid, before any
    write, for a tag out of its bounds or one more than limits.MAX_TAGS."""
    check_tag(key, value)
    tags = dict(loads(stored)) if stored else {}
    if tags.get(key) == value:
        return None
    if key not in tags and len(tags) >= limits.MAX_TAGS:
        raise TagInvalid(
            f"tag {key!r}: the workflow carries {len(tags)} tags already; at most {limits.MAX_TAGS}"
        )
    tags[key] = value
    return jsonsafe.dumps(tags)


def parse_tag_filter(text: str) -> tuple[str, str]:
    """`key:value` (the query parameter `tag`), split at its first colon."""
    key, colon, value = text.partition(":")
    if not colon:
        raise TagInvalid(f"tag filter {text!r} is key:value")
    check_tag(key, value)
    return key, value


def canonical(values: Mapping[str, Any]) -> str:
    """Matched values as the index compares them: canonical JSON (sorted keys, no spaces), so
    "o-1" matches only "o-1" and 7 only 7."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def check_match(name: str, values: Mapping[str, Any]) -> str:
    """A match as `POST /signals` gives it: its canonical form, if each value is a string, a
    number or a boolean within the cap; InputInvalid otherwise."""
    if not values or len(values) > limits.MAX_MATCH_FIELDS:
        raise InputInvalid(
            f"match names 1 to {limits.MAX_MATCH_FIELDS} fields, as a Match does", "match"
        )
    for field, value in values.items():
        problem = _value_problem(value)
        if problem is not None:
            raise InputInvalid(f"match.{field}: {problem}", "match")
    return canonical(values)


def _value_problem(value: Any) -> str | None:
    if isinstance(value, bool | int | float | str):
        if len(canonical({"v": value})) - 6 > limits.MAX_MATCH_VALUE_CHARS:
            return f"longer than {limits.MAX_MATCH_VALUE_CHARS} characters"
        return None
    return f"a {type(value).__name__}: a matched value is a string, a number or a boolean"


def match_values(spec_match: Mapping[str, str], input_value: Any, step: str) -> str:
    """The canonical values a step's `Match` selects in the workflow's input: InputInvalid
    (400, nothing written) if one selects nothing or no scalar, so a workflow never waits on
    a key it could not be found by."""
    values: dict[str, Any] = {}
    for field, text in spec_match.items():
        path = fanout.parse_path(text)
        try:
            value = fanout.select(path, input_value)
        except fanout.PathError as exc:
            raise InputInvalid(
                f"step '{step}' waits on Match.{field} = {text}, which selects nothing in the "
                f"input ({exc})",
                "input",
            ) from None
        problem = _value_problem(value)
        if problem is not None:
            raise InputInvalid(f"step '{step}' Match.{field} = {text}: {problem}", "input")
        values[field] = value
    return canonical(values)


def tag_item(
    owner: str, workflow_id: str, created_at: int, key: str, value: str, expires_at: int
) -> Item:
    """The index item of one tag (keys.py: `K#T#<key>` in the workflow's partition)."""
    return {
        "pk": wf_pk(workflow_id),
        "sk": tag_item_sk(key),
        "key_pk": tag_pk(owner, key, value, key_shard(workflow_id)),
        "key_sk": list_sk(created_at, workflow_id),
        "tag_key": key,
        "tag_value": value,
        "expires_at": expires_at,
    }


def match_item(
    owner: str,
    workflow_id: str,
    created_at: int,
    step: str,
    signal: str,
    values: str,
    expires_at: int,
) -> Item:
    """The index item of a step's correlation (keys.py: `K#M#<step>`)."""
    return {
        "pk": wf_pk(workflow_id),
        "sk": match_item_sk(step),
        "key_pk": match_pk(owner, signal, values, key_shard(workflow_id)),
        "key_sk": list_sk(created_at, workflow_id),
        "signal": signal,
        "match": values,
        "expires_at": expires_at,
    }


# The index keys of a correlation item: removed, the item leaves the sparse by_key index.
MATCH_INDEX_KEYS = ("key_pk", "key_sk")


def released_matches(workflow_id: str, steps: Iterable[str]) -> list[tuple[str, str]]:
    """The correlation items (pk, sk) a workflow that ended or unwinds takes out of the by_key
    index (REMOVE `MATCH_INDEX_KEYS`): no step of it waits for a signal again, so a signal by
    those values never reads it again (issue 37.3)."""
    return [(wf_pk(workflow_id), match_item_sk(step)) for step in steps]
