"""docs/testing.md's examples run, in order, as one test would: the definition it shows, its
agents and every step of its story (answering an approval, firing a wait, the path taken)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")


def test_every_example_runs_in_order(tmp_path: Path) -> None:
    (definition,) = re.findall(r"```yaml\n(.*?)```", PAGE, re.S)
    (tmp_path / "order.yaml").write_text(definition)
    blocks = re.findall(r"```python\n(.*?)```", PAGE, re.S)
    assert len(blocks) >= 7
    namespace: dict[str, object] = {"DEFINITIONS": tmp_path}
    for block in blocks:
        exec(compile(block, "docs/testing.md", "exec"), namespace)  # noqa: S102 - our docs


def test_the_engine_reference_lists_every_public_method() -> None:
    from shepherd.testing import MemoryEngine

    public = {
        name
        for name in vars(MemoryEngine)
        if not name.startswith("_") and callable(getattr(MemoryEngine, name))
    }
    table = PAGE[PAGE.index("## Reference") :]
    missing = sorted(name for name in public if f"`{name}(" not in table)
    assert not missing, f"docs/testing.md's reference lacks {missing}"


def test_the_tutorial_and_the_readme_link_it() -> None:
    assert "(testing.md)" in (ROOT / "docs" / "tutorial.md").read_text()
    assert "(docs/testing.md)" in (ROOT / "README.md").read_text()
