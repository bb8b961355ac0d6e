"""Amazon States Language: Step Functions state machines run as they are.

`load_file` / `load_directory` read `<name>.asl.json` and `<name>.asl.yaml` files (workflow
type `<name>`); `document` validates them; `machine` is the interpreter (a pure transition
function); `runner.run_state_machine` drives it in process.
"""

from __future__ import annotations

import json
from pathlib import Path

from shepherd.errors import DefinitionError

from . import mocks
from .document import StateMachine, parse
from .runner import Callbacks, ExecutionResult, run_state_machine

ASL_SUFFIXES = (".asl.json", ".asl.yaml", ".asl.yml")

__all__ = [
    "ASL_SUFFIXES",
    "Callbacks",
    "ExecutionResult",
    "StateMachine",
    "asl_files",
    "is_asl_file",
    "load_directory",
    "load_file",
    "mocks",
    "parse",
    "run_state_machine",
    "workflow_type",
]


def is_asl_file(path: Path) -> bool:
    return path.name.endswith(ASL_SUFFIXES)


def workflow_type(path: Path) -> str:
    """`<name>` of `<name>.asl.json`."""
    for suffix in ASL_SUFFIXES:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    raise DefinitionError(f"{path}: not an ASL file (names end {', '.join(ASL_SUFFIXES)})")


def load_file(path: Path | str) -> StateMachine:
    import yaml  # noqa: PLC0415 - only a file read needs it, never the engine

    path = Path(path)
    workflow_type(path)
    try:
        text = path.read_text()
        data = json.loads(text) if path.name.endswith(".json") else yaml.safe_load(text)
    except OSError as exc:
        raise DefinitionError(f"{path}: {exc.strerror}") from None
    except ValueError as exc:
        raise DefinitionError(f"{path}: not valid JSON: {exc}") from None
    except yaml.YAMLError as exc:
        raise DefinitionError(f"{path}: not valid YAML: {exc}") from None
    return parse(data, str(path))


def asl_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if is_asl_file(p))


def load_directory(directory: Path | str) -> dict[str, StateMachine]:
    """Every ASL state machine of a definitions folder by workflow type; all errors at once."""
    found: dict[str, StateMachine] = {}
    problems: list[str] = []
    for path in asl_files(Path(directory)):
        try:
            found[workflow_type(path)] = load_file(path)
        except DefinitionError as exc:
            problems.append(str(exc))
    if problems:
        raise DefinitionError("\n".join(problems))
    return found
