"""docs/architecture.md opens with a map of the code (issue 40.7): every module of the core
and of the handlers is named in it, every folder of the core too, and every file it names
exists, so the map cannot drift from the tree."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "layers" / "shepherd" / "python" / "shepherd"
HANDLERS = ROOT / "functions" / "shepherd_handlers"


def _map_section() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("## A map of the code")
    return text[start : text.index("\n## ", start + 1)]


def _named(section: str) -> set[str]:
    return set(re.findall(r"`([A-Za-z0-9_/.]+)`", section))


def test_every_module_and_folder_is_on_the_map() -> None:
    named = _named(_map_section())
    files = {p.name for p in (*CORE.rglob("*.py"), *HANDLERS.glob("*.py"))}
    missing = sorted(files - named)
    assert not missing, f"modules not on the map of the code: {missing}"
    folders = {f"{p.name}/" for p in CORE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= named, sorted(folders - named)


def test_every_file_the_map_names_exists() -> None:
    files = {p.name for p in (*CORE.rglob("*.py"), *HANDLERS.glob("*.py"))}
    files |= {"test_kind_branches.py", "test_signal_steps.py", "test_code_map.py"}
    named = {n.rsplit("/", 1)[-1] for n in _named(_map_section()) if n.endswith(".py")}
    assert named <= files, sorted(named - files)
