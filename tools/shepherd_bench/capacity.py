"""What one stack holds: the most agent pools a Shepherd construct fits in one stack, found by
synthesizing it (cdk-nag on) with more and more pools until the synth refuses, and what each
size takes (resources, template bytes, the largest function environment).

Pool names are as long as allowed (32 characters), so the numbers are the worst case.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

POOL_NAME_LENGTH = 32


def _definitions(base: Path, pools: int) -> tuple[Path, Path]:
    definitions = base / "flows"
    definitions.mkdir(parents=True)
    steps = [
        f"  - Name: s{i}\n    Agent: a{i}\n    Pool: p{i:03d}-{'x' * (POOL_NAME_LENGTH - 5)}\n"
        f"    TimeoutSeconds: 30" + (f"\n    DependsOn: [s{i - 1}]" if i else "")
        for i in range(pools)
    ]
    (definitions / "wide.yaml").write_text("Name: wide\nSteps:\n" + "\n".join(steps) + "\n")
    src = base / "src" / "wide_agents"
    src.mkdir(parents=True)
    # The synth checks that the shipped modules register every agent a pool runs.
    (src / "__init__.py").write_text(
        "from shepherd import AgentRegistry\n\nregistry = AgentRegistry()\n"
        f"for i in range({pools}):\n"
        "    registry.register(f'a{i}', lambda ctx: None)\n"
    )
    return definitions, src.parent


def synth(pools: int) -> dict[str, Any] | None:
    """The stack's size with `pools` pools, or None if the synth refuses it."""
    from aws_cdk import App, Stack
    from shepherd_infra import AgentCode, Shepherd, add_checks

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        definitions, src = _definitions(base, pools)
        app = App(outdir=str(base / "out"))
        stack = Stack(app, "WideStack")
        Shepherd(
            stack,
            "Shepherd",
            definitions_dir=definitions,
            agents=AgentCode(path=src, modules=["wide_agents"]),
        )
        add_checks(app)
        try:
            app.synth()
        except RuntimeError:
            return None
        path = base / "out" / "WideStack.template.json"
        template = json.loads(path.read_text())
        environments = [
            len(json.dumps(r["Properties"]["Environment"]["Variables"]))
            for r in template["Resources"].values()
            if r["Type"] == "AWS::Lambda::Function"
        ]
        return {
            "pools": pools,
            "resources": len(template["Resources"]),
            "template_bytes": path.stat().st_size,
            "largest_environment_bytes": max(environments),
        }


def measure(start: int = 50, stop: int = 60) -> dict[str, Any]:
    """Synthesize 1 and `start` pools, then one more at a time up to the first refused."""
    rows = [r for r in (synth(1), synth(start)) if r is not None]
    most = start if rows and rows[-1]["pools"] == start else None
    for pools in range(start + 1, stop + 1):
        row = synth(pools)
        if row is None:
            break
        rows.append(row)
        most = pools
    return {"rows": rows, "most_pools": most, "refused_at": (most or 0) + 1}
