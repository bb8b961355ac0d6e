"""Release check of the distribution (`make release-check`): what a team installs is sound.

1. `python -m build` makes the sdist and the wheel (from a copy of the checkout's tracked files,
   so nothing untracked slips in);
2. `twine check --strict` checks their metadata (the README renders, the fields are complete),
   and the wheel's own: its name and version, its runtime dependencies ranges, not pins;
3. a clean virtualenv installs the wheel with every runtime dependency at the **lowest** version
   pyproject.toml allows (constraints `name==low`), checks that those are what it got, imports
   the runtime, the handlers and the CLI, and runs a workflow on `MemoryEngine`;
4. `shepherd init` there makes a project from that same wheel, and the project's own tests pass
   on those lowest versions (the scaffold pins the wheel by its sha256).

Needs no AWS credentials (the Powertools layer's parameters: `make powertools-layer-check`).
Prints each step; exit 1 on the first problem.
"""

from __future__ import annotations

import argparse
import email.parser
import json
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTION = "shepherd_workflows"
# A runtime requirement as pyproject.toml writes it: `name[extras]>=low,<high`.
RANGE = re.compile(
    r"^(?P<name>[A-Za-z0-9_.-]+)(?P<extras>\[[^\]]*\])?>=(?P<low>[^,<>=!~ ]+),<[^,]+$"
)
SMOKE = """
import importlib.metadata as m, json, sys
import shepherd, shepherd_handlers, shepherd_cli.main
from shepherd import AgentRegistry, parse_definition
from shepherd.testing import MemoryEngine, WorkflowStatus
registry = AgentRegistry()
registry.agent("hello")(lambda ctx: {"hello": ctx.input["name"]})
definition = parse_definition({"Name": "hi", "Steps": [
    {"Name": "hello", "Agent": "hello", "Pool": "p", "TimeoutSeconds": 5}]}, "hi.yaml")
engine = MemoryEngine({"hi": definition}, agents=registry)
outcome = engine.run(engine.start("hi", {"name": "ada"}))
assert outcome.status is WorkflowStatus.SUCCEEDED, outcome
print(json.dumps({n: m.version(n) for n in json.loads(sys.argv[1])}))
"""


class CheckFailed(Exception):
    """One step of the check found a problem: said in a sentence."""


def runtime_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    return list(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"])


def lowest_pins(requirements: Iterable[str]) -> dict[str, str]:
    """Each runtime dependency at the lowest version its range allows (`boto3>=1.35.0,<2` ->
    boto3: 1.35.0). A requirement that is not such a range is refused: a pin clashes with any
    service that pins its own, and no lower bound leaves nothing to test."""
    pins = {}
    for requirement in requirements:
        found = RANGE.match(requirement.replace(" ", ""))
        if found is None:
            raise CheckFailed(
                f"runtime dependency '{requirement}' is not a range `name>=low,<high`"
            )
        pins[found["name"].lower()] = found["low"]
    return pins


# The test tools the lowest-versions suite needs (`make test-lowest`), at the dev extra's pins.
TEST_TOOLS = ("pytest", "hypothesis")


def lowest_constraints(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """pip constraints for `make test-lowest`: every runtime dependency at its lowest allowed
    version, the test tools at this repository's own pins (one place says each version)."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    pins = lowest_pins(project["dependencies"])
    for requirement in project["optional-dependencies"]["dev"]:
        name, _, version = requirement.partition("==")
        if name in TEST_TOOLS:
            pins[name] = version
    return "".join(f"{name}=={version}\n" for name, version in pins.items())


def metadata_problems(metadata: str, version: str) -> list[str]:
    """What is wrong with a wheel's METADATA: its name, its version, a pinned dependency."""
    message = email.parser.Parser().parsestr(metadata)
    problems = []
    if message["Name"] != "shepherd-workflows":
        problems.append(f"Name is {message['Name']!r}, not 'shepherd-workflows'")
    if message["Version"] != version:
        problems.append(f"Version is {message['Version']!r}, not shepherd.__version__ {version!r}")
    for requirement in message.get_all("Requires-Dist") or []:
        if "extra ==" in requirement:
            continue  # the extras (cdk, cli, dev) are the developer tools, pinned on purpose
        if "==" in requirement or ">=" not in requirement:
            problems.append(f"runtime Requires-Dist {requirement!r} is not a range")
    if not message.get_payload():
        problems.append("no long description (the README)")
    return problems


def _run(args: list[str], cwd: Path, what: str, **kwargs: object) -> str:
    print(f"  {what}", flush=True)
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise CheckFailed(f"{what} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return str(done.stdout)


def build(work: Path) -> tuple[Path, Path]:
    """The sdist and the wheel, from the tracked files only."""
    source = work / "source"
    files = _run(["git", "ls-files", "-z"], ROOT, "git ls-files").split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((ROOT / name).read_bytes())
    dist = work / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(source)], work, "build")
    (sdist,) = dist.glob(f"{DISTRIBUTION}-*.tar.gz")
    (wheel,) = dist.glob(f"{DISTRIBUTION}-*-py3-none-any.whl")
    return sdist, wheel


def check_metadata(sdist: Path, wheel: Path) -> None:
    import shepherd

    _run(
        [sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)],
        ROOT,
        "twine check",
    )
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        problems = metadata_problems(archive.read(name).decode(), shepherd.__version__)
    if problems:
        raise CheckFailed("the wheel's metadata: " + "; ".join(problems))


def install_lowest(work: Path, wheel: Path, pins: dict[str, str]) -> Path:
    """A clean virtualenv with the wheel and each runtime dependency at its lowest; its python."""
    venv = work / "lowest"
    _run([sys.executable, "-m", "venv", str(venv)], work, "a clean virtualenv")
    python = venv / "bin" / "python"
    constraints = work / "lowest.txt"
    constraints.write_text("".join(f"{name}=={low}\n" for name, low in pins.items()))
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "-c",
            str(constraints),
            str(wheel),
            "pytest",
        ],
        work,
        "install the wheel at the lowest versions: "
        + ", ".join(f"{n} {v}" for n, v in pins.items()),
    )
    got = json.loads(
        _run([str(python), "-c", SMOKE, json.dumps(list(pins))], work, "import it, run a workflow")
    )
    wrong = {n: v for n, v in got.items() if v != pins[n]}
    if wrong:
        raise CheckFailed(f"the clean virtualenv got {wrong}, not the lowest {pins}")
    return python


def scaffold_tests(work: Path, python: Path) -> None:
    """`shepherd init` from the wheel, then the project's own tests, on the lowest versions."""
    shepherd = python.parent / "shepherd"
    _run([str(shepherd), "init", "lowest-app"], work, "shepherd init (the project pins the wheel)")
    project = work / "lowest-app"
    out = _run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        project,
        "the project's tests on the lowest versions",
        env={"PYTHONPATH": str(project / "src"), "PATH": "/usr/bin:/bin"},
    )
    print(f"    {out.strip().splitlines()[-1]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make release-check", description=__doc__)
    parser.add_argument("--keep", help="work in this folder and keep it (default: a temporary one)")
    parser.add_argument(
        "--print-lowest-constraints",
        action="store_true",
        help="print the constraints `make test-lowest` installs with, and do nothing else",
    )
    args = parser.parse_args(argv)
    if args.print_lowest_constraints:
        print(lowest_constraints(), end="")
        return 0
    try:
        pins = lowest_pins(runtime_requirements())
        with tempfile.TemporaryDirectory(prefix="shepherd-release-") as tmp:
            work = Path(args.keep) if args.keep else Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            sdist, wheel = build(work)
            check_metadata(sdist, wheel)
            python = install_lowest(work, wheel, pins)
            scaffold_tests(work, python)
    except CheckFailed as exc:
        print(f"release check FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"release check passed: {wheel.name} and {sdist.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
