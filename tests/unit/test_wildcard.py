"""StringMatches in linear time (issue 35.1): exactly Step Functions' semantics (`*` any run,
`\\*` a star, `\\\\` a backslash, nothing else special), checked against a regular-expression
reference on many small cases, and a caller's huge string against many stars ends at once
instead of backtracking (the match used to be a compiled `.*a.*b` regular expression)."""

from __future__ import annotations

import random
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from shepherd.decisions import choice, wildcard


def _reference(pattern: str, text: str) -> bool:
    """The obvious (backtracking) reading, fine on tiny inputs."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\":
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(".*" if pattern[i] == "*" else re.escape(pattern[i]))
            i += 1
    return re.fullmatch("".join(out), text, re.DOTALL) is not None


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("", "", True),
        ("", "a", False),
        ("*", "", True),
        ("*", "anything\nat all", True),
        ("abc", "abc", True),
        ("abc", "abcd", False),
        ("a*", "a", True),
        ("*a", "ba", True),
        ("*a", "ab", False),
        ("a*a", "a", False),  # prefix and suffix cannot share the one character
        ("a*a", "aa", True),
        ("*ab*ab*", "abab", True),
        ("*ab*ab*", "aba", False),
        ("a\\*b", "a*b", True),
        ("a\\*b", "axb", False),
        ("a\\\\b", "a\\b", True),
        ("\\\\*", "\\anything", True),
        ("*.log", "x.log", True),
        ("?", "x", False),  # `?` is not special in ASL
        ("[a]", "[a]", True),
    ],
)
def test_matches_as_step_functions_reads_a_pattern(pattern: str, text: str, expected: bool) -> None:
    assert wildcard.matches(pattern, text) is expected


def test_matches_agrees_with_the_reference_on_random_cases() -> None:
    rng = random.Random(35)
    for _ in range(5000):
        pattern = "".join(
            rng.choice(["a", "b", "*", "\\*", "\\\\"]) for _ in range(rng.randint(0, 7))
        )
        text = "".join(rng.choice("ab*\\") for _ in range(rng.randint(0, 9)))
        assert wildcard.matches(pattern, text) is _reference(pattern, text), (pattern, text)


@pytest.mark.parametrize("pattern", ["a\\b", "ab\\", "\\", "x" * (wildcard.MAX_PATTERN + 1)])
def test_a_pattern_outside_the_rules_is_refused(pattern: str) -> None:
    with pytest.raises(wildcard.PatternError):
        wildcard.check(pattern)


@contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Fail (rather than hang) if the body backtracks: the old regex took minutes here."""

    def _expired(*_: object) -> None:
        raise AssertionError(f"still matching after {seconds} s: not linear")

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_huge_caller_string_against_many_stars_does_not_backtrack() -> None:
    """200,000 characters against `*a*a*...*b` (no `b`: every split is tried by a backtracking
    matcher). A condition is evaluated by the scheduler and the supervisor on caller data."""
    text = "a" * 200_000
    rule = choice.Condition.model_validate(
        {"Variable": "$.input.s", "StringMatches": "*a" * 20 + "*b"}
    )
    with _deadline(20):
        assert choice.evaluate(rule, choice.document({"s": text}, {})) is False
        assert wildcard.matches("*a" * 20 + "*", text) is True
