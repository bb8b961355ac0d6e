"""StringMatches in a state machine: `*` matches any run of characters; `\\*` is a literal
star and `\\\\` a backslash; a backslash before any other character stands for that character.

The match itself is `shepherd.decisions.wildcard.matches_segments`, the one linear matcher
(each literal run between stars found at its leftmost place, no backtracking); this module only
reads a pattern the lenient way a state machine may write it (the native definitions refuse a
stray backslash at validation instead).
"""

from __future__ import annotations

from functools import lru_cache

from shepherd.decisions.wildcard import matches_segments


@lru_cache(maxsize=1024)
def segments(pattern: str) -> tuple[str, ...]:
    """The literal runs between unescaped stars."""
    out: list[str] = []
    run: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            run.append(pattern[i + 1])
            i += 2
            continue
        if c == "*":
            out.append("".join(run))
            run = []
        else:
            run.append(c)
        i += 1
    out.append("".join(run))
    return tuple(out)


def matches(text: str, pattern: str) -> bool:
    return matches_segments(segments(pattern), text)
