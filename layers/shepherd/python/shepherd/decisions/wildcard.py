"""Amazon States Language's `StringMatches`, in time linear in the text (issue 35.1).

Step Functions' rule: `*` matches any run of characters (none included), `\\*` is a literal
star, `\\\\` a literal backslash, and no other character is special. A backslash before any
other character (or at the end) is refused here when the pattern is validated, so a pattern
never means something the author did not write.

Why not a regular expression: a pattern with two or more stars compiled to `.*a.*b` backtracks
(quadratic or worse in the caller's string), and the caller controls the string. Instead the
pattern is split at its unescaped stars into literal segments: the first must be a prefix, the
last a suffix, and each one between is found at its leftmost place after the previous one
(leftmost is always safe: any match using a later place also works from the earlier one). Each
character of the text is passed over once per segment search (`str.find`, which CPython keeps
linear with its two-way search for long needles), so a match costs O(len(text) + len(pattern))
and a pattern is at most `MAX_PATTERN` characters.

Pure and dependency-free, so the ASL interpreter can reuse it. Internal: not part of
Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from functools import lru_cache

MAX_PATTERN = 1024  # characters in one pattern (enforced where a definition is validated)


class PatternError(ValueError):
    """A pattern Step Functions' rules do not allow (a stray backslash, or too long)."""


@lru_cache(maxsize=1024)
def segments(pattern: str, *, strict: bool = True) -> tuple[str, ...]:
    """The literal runs between unescaped stars: `a*b\\*c*` -> ('a', 'b*c', ''). One more
    than the number of stars. Strict (a native definition's): raises PatternError on a
    backslash not before `*` or `\\`, and on a pattern over MAX_PATTERN; lenient (a state
    machine's, as Step Functions reads it): a backslash makes the next character literal,
    whatever it is, and one at the end stands for itself."""
    if strict and len(pattern) > MAX_PATTERN:
        raise PatternError(f"a pattern is at most {MAX_PATTERN} characters (got {len(pattern)})")
    out: list[str] = []
    run: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and strict and (i + 1 >= len(pattern) or pattern[i + 1] not in "*\\"):
            raise PatternError("a backslash escapes only * or \\ (write \\\\ for one)")
        if ch == "\\":
            if i + 1 >= len(pattern):  # lenient: a backslash at the end stands for itself
                run.append(ch)
                break
            run.append(pattern[i + 1])
            i += 2
            continue
        if ch == "*":
            out.append("".join(run))
            run = []
        else:
            run.append(ch)
        i += 1
    out.append("".join(run))
    return tuple(out)


def check(pattern: str) -> None:
    """Raise PatternError if `pattern` is not a valid StringMatches pattern."""
    segments(pattern)


def matches(pattern: str, text: str) -> bool:
    """Whether the whole of `text` matches `pattern` (ASL's StringMatches)."""
    return matches_segments(segments(pattern), text)


def matches_segments(parts: tuple[str, ...], text: str) -> bool:
    """Whether the whole of `text` matches the literal runs `parts` with a star between each
    two (the linear search above; the ASL interpreter parses its patterns its own way)."""
    if len(parts) == 1:
        return text == parts[0]
    first, *middle, last = parts
    if len(text) < len(first) + len(last) or not text.startswith(first):
        return False
    end = len(text) - len(last)  # the suffix's place: the middle must fit before it
    if not text.endswith(last):
        return False
    position = len(first)
    for part in middle:
        if not part:
            continue
        found = text.find(part, position, end)
        if found < 0:
            return False
        position = found + len(part)
    return True
