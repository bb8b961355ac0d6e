"""StringMatches: `*` matches any run of characters; `\\*` is a literal star and `\\\\` a
backslash.

No backtracking: the greedy two-pointer algorithm remembers only the last star, so a match
costs at most len(text) x len(pattern) steps whatever the pattern (never exponential).
The lead will unify this with
`shepherd.decisions.wildcard` (written on another branch) when both are merged.
"""

from __future__ import annotations


def _tokens(pattern: str) -> list[str | None]:
    """The pattern as characters, with None for an unescaped star."""
    out: list[str | None] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(pattern[i + 1])
            i += 2
            continue
        out.append(None if c == "*" else c)
        i += 1
    return out


def matches(text: str, pattern: str) -> bool:
    tokens = _tokens(pattern)
    t = p = 0
    star, mark = -1, 0
    while t < len(text):
        if p < len(tokens) and tokens[p] is not None and tokens[p] == text[t]:
            t += 1
            p += 1
        elif p < len(tokens) and tokens[p] is None:
            star, mark = p, t
            p += 1
        elif star >= 0:
            p = star + 1
            mark += 1
            t = mark
        else:
            return False
    while p < len(tokens) and tokens[p] is None:
        p += 1
    return p == len(tokens)
