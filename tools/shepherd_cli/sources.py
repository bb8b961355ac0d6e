"""Where a project made by `shepherd init` installs Shepherd from: something every teammate and
CI can install too, pinned, never a path on one person's machine.

- a release on a package index, by version (`shepherd-workflows==0.1.0`);
- a wheel file, copied into the project's `wheels/` (committed with it) and installed from there
  pinned by its sha256 (`wheels/requirements.txt`, installed with `--require-hashes` before the
  project; then `--find-links wheels` by version): the way to share a build before it is
  published, and no package of the same name on an index can stand in for it;
- a git URL pinned to a commit or a release tag (`shepherd-workflows @ git+https://...@<sha>`).

By default `shepherd init` uses the way the running Shepherd was installed (its PEP 610
`direct_url.json`): from a wheel file, that wheel; from git, that commit; else its version.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import shepherd

# Shepherd's distribution on a package index (`shepherd` there is an unrelated project); the
# import package is `shepherd`.
DISTRIBUTION = "shepherd-workflows"
WHEEL_PREFIX = DISTRIBUTION.replace("-", "_") + "-"
WHEELS_DIR = "wheels"
# The hash-pinned requirement of the copied wheel (pip's hash-checking mode).
WHEEL_PIN = f"{WHEELS_DIR}/requirements.txt"

VERSION = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")
# A git ref that pins: a commit (7-40 hex digits) or a release tag (`v0.1.0`, `0.1.0`).
PINNED_REF = re.compile(r"[0-9a-f]{7,40}|v?\d+(\.\d+)+([.-]?\w+)?")


class SourceError(ValueError):
    """What `--shepherd` names cannot be installed by a team."""


@dataclass(frozen=True)
class Source:
    """One of the three ways a team installs Shepherd (the module's docstring)."""

    kind: Literal["index", "wheel", "git"]
    version: str  # the version pinned (for git: the running one, for the docs only)
    location: str = ""  # the wheel file, or the git URL with its ref
    index_url: str | None = None
    note: str = ""  # what `shepherd init` should tell the user about this choice

    @classmethod
    def parse(cls, spec: str, index_url: str | None = None) -> Source:
        """A version, a wheel file or a pinned git URL, as `--shepherd` gives it."""
        if VERSION.fullmatch(spec):
            return cls("index", spec, index_url=index_url)
        if spec.startswith("git+"):
            url, _, ref = spec.rpartition("@")
            if not url.startswith("git+") or "/" in ref or not PINNED_REF.fullmatch(ref):
                raise SourceError(
                    f"--shepherd {spec}: pin the git URL to a commit or a release tag "
                    "(git+https://host/org/shepherd.git@<commit>)"
                )
            return cls("git", shepherd.__version__, spec, index_url)
        path = Path(spec).expanduser()
        if path.suffix == ".whl":
            if not path.is_file():
                raise SourceError(f"--shepherd {spec}: no such wheel file")
            return cls("wheel", _wheel_version(path), str(path.resolve()), index_url)
        if path.is_dir():
            raise SourceError(
                f"--shepherd {spec}: a folder is on your machine only; build a wheel from it "
                f"(python -m build {spec}) and pass the .whl, or a pinned git URL"
            )
        raise SourceError(
            f"--shepherd {spec}: not a version, a wheel file or a git URL "
            "(git+https://host/org/shepherd.git@<commit>)"
        )

    @classmethod
    def installed(cls, index_url: str | None = None) -> Source:
        """The way the running Shepherd was installed, when a teammate can install it so too."""
        try:
            dist = importlib.metadata.distribution(DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            return cls("index", shepherd.__version__, index_url=index_url)
        direct = json.loads(dist.read_text("direct_url.json") or "null")
        url = str(direct.get("url", "")) if isinstance(direct, dict) else ""
        if isinstance(direct, dict):
            vcs = direct.get("vcs_info") or {}
            if vcs.get("vcs") == "git" and vcs.get("commit_id"):
                return cls("git", dist.version, f"git+{url}@{vcs['commit_id']}", index_url)
            if "archive_info" in direct and url.startswith("file:") and url.endswith(".whl"):
                wheel = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path))
                if wheel.is_file():
                    return cls("wheel", _wheel_version(wheel), str(wheel), index_url)
        note = ""
        if url:
            note = (
                f"Shepherd here was installed from {url}, which a teammate cannot install; the "
                f"project pins {DISTRIBUTION}=={dist.version} from a package index. To share "
                "this build, pass a wheel of it (python -m build) or a pinned git URL with "
                "--shepherd (the project's README says how)."
            )
        return cls("index", dist.version, index_url=index_url, note=note)

    @property
    def wheel(self) -> Path | None:
        return Path(self.location) if self.kind == "wheel" else None

    def requirement(self, extras: str = "") -> str:
        name = f"{DISTRIBUTION}[{extras}]" if extras else DISTRIBUTION
        if self.kind == "git":
            return f"{name} @ {self.location}"
        return f"{name}=={self.version}"

    def wheel_pin(self) -> str | None:
        """`wheels/requirements.txt` for a wheel source: the copied wheel and its sha256, which
        `make dev` installs with `--require-hashes` (a changed or substituted file fails)."""
        wheel = self.wheel
        if wheel is None:
            return None
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        return (
            "# Shepherd, pinned by its hash: `make dev` installs this file with --require-hashes\n"
            "# before the project, so the wheel it installs is this very file.\n"
            f"./{WHEELS_DIR}/{wheel.name} --hash=sha256:{digest}\n"
        )

    def pip_args(self) -> str:
        """What `make dev` passes to pip: where the wheel is, or which index to use."""
        args = [f"--find-links {WHEELS_DIR}"] if self.kind == "wheel" else []
        if self.index_url:
            args.append(f"--index-url {self.index_url}")
        return " ".join(args)

    def describe(self) -> str:
        """How this project gets Shepherd, for its README."""
        if self.kind == "wheel":
            wheel = Path(self.location).name
            return (
                f"`{WHEELS_DIR}/{wheel}`, pinned by its sha256 in `{WHEEL_PIN}` (`make dev` "
                "installs it with `--require-hashes`, then the project with `--find-links "
                f"{WHEELS_DIR}`): commit both, so teammates and CI install this very build"
            )
        if self.kind == "git":
            return f"the git URL `{self.location}`, pinned: everyone installs that commit"
        where = f"the index {self.index_url}" if self.index_url else "your package index"
        return f"version {self.version} from {where}"


def _wheel_version(path: Path) -> str:
    """The version in a Shepherd wheel's file name (`shepherd_workflows-0.1.0-py3-...whl`)."""
    if not path.name.startswith(WHEEL_PREFIX):
        raise SourceError(f"{path.name} is not a wheel of {DISTRIBUTION}")
    version = path.name[len(WHEEL_PREFIX) :].split("-")[0]
    if not VERSION.fullmatch(version):
        raise SourceError(f"{path.name}: no version in the file name")
    return version
