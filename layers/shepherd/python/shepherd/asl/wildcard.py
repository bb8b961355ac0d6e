"""StringMatches in a state machine: `*` matches any run of characters; `\\*` is a literal
star and `\\\\` a backslash; a backslash before any other character stands for that character.

The one linear matcher is `shepherd.decisions.wildcard` (each literal run between stars found
at its leftmost place, no backtracking); a state machine's patterns are read leniently, as
Step Functions reads them (the native definitions refuse a stray backslash at validation).
"""

from __future__ import annotations

from shepherd.decisions.wildcard import matches_segments, segments


def matches(text: str, pattern: str) -> bool:
    return matches_segments(segments(pattern, strict=False), text)
