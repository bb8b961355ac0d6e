"""One step kind, one module (issue 40.1): the places outside `shepherd.kinds` that branch on
a step's kind, counted, held under a ceiling that only goes down.

Counted in the core (`layers/shepherd/python/shepherd`, the kinds' own package left out) and
the handlers (`functions/shepherd_handlers`), read from the source:
- a test of a field that only one kind has, `x.<field> is None` / `is not None`, on a step's
  definition (`map`, `workflow`, `wait`, `approval`, `wait_for_signal`) or on its record
  (`child_id`, `child_cancel`, `fanout`, `index`, `position`, `decision`: a map's, a map
  item's, a child's, an approval's);
- such a field used as a truth value (`if spec.map:`, `x if spec.approval else y`);
- a read of a kind's flag (`is_task`, `runs_agent`, `rests`, `fans_out`) or a call of
  `starts_children`, a comparison of `kind_of(...).name`, an `isinstance` against a kind's
  class: asking the registry which kind it holds is still branching on it.
A question the kind answers itself (`kind_of(spec).at_deadline(...)`, `.compensated(...)`,
`.rest_until(...)`) is not counted: that is the point of the registry.

Moving a kind's code into its module lowers the count: lower `CEILING` with it. A new branch
fails here: ask the kind instead (add a member to `StepKind` if none fits)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = (ROOT / "layers" / "shepherd" / "python" / "shepherd", ROOT / "functions")
KINDS = ROOT / "layers" / "shepherd" / "python" / "shepherd" / "kinds"

SPEC_FIELDS = {"map", "workflow", "wait", "approval", "wait_for_signal"}
RECORD_FIELDS = {"child_id", "child_cancel", "fanout", "index", "position", "decision"}
FLAGS = {"is_task", "runs_agent", "rests", "fans_out"}
QUESTIONS = {"starts_children"}

# 158 before the registry (this test run on the tree before it), 113 after its first moves; the
# target is 10. Issue 37 then added four in the definition model (a detached step must be a
# child step, not a map; the steps whose WaitForSignal names a Match): accepted at the merge,
# to go into kinds/child.py and kinds/signal.py with the rest of the definition model's checks.
# Issue 42.5 added three more there (a Wait's paths read only dependencies; data expressions
# only on a task that runs an agent or a Pass step): the definition model cannot ask the kinds
# (they import it), so they wait for the same move.
CEILING = 120


def _tests_a_kind_field(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.Is | ast.IsNot)
        and isinstance(node.comparators[0], ast.Constant)
        and node.comparators[0].value is None
        and isinstance(node.left, ast.Attribute)
        and node.left.attr in SPEC_FIELDS | RECORD_FIELDS
    )


def _reads_a_kind_flag(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Load)
        and node.attr in FLAGS | QUESTIONS
    )


KIND_CLASSES = {"Task", "Map", "Child", "Wait", "Approval", "Signal", "Resting"}


def _names_a_kind(node: ast.AST) -> bool:
    """`kind_of(spec).name == ...` or `isinstance(kind, Approval)`: which kind, by name."""
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        return any(
            isinstance(side, ast.Attribute)
            and side.attr == "name"
            and isinstance(side.value, ast.Call)
            and ast.unparse(side.value.func) == "kind_of"
            for side in sides
        )
    return (
        isinstance(node, ast.Call)
        and ast.unparse(node.func) == "isinstance"
        and len(node.args) == 2
        and any(n.id in KIND_CLASSES for n in ast.walk(node.args[1]) if isinstance(n, ast.Name))
    )


def _truth_tests(tree: ast.AST) -> list[ast.expr]:
    """Every expression `tree` uses as a truth value (`if x`, `x and y`, `not x`, ...)."""
    tests: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If | ast.IfExp | ast.While | ast.Assert):
            tests.append(node.test)
        elif isinstance(node, ast.BoolOp):
            tests.extend(node.values)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            tests.append(node.operand)
        elif isinstance(node, ast.match_case) and node.guard is not None:
            tests.append(node.guard)
        elif isinstance(node, ast.comprehension):
            tests.extend(node.ifs)
    return tests


def branches(tree: ast.AST) -> list[tuple[int, str]]:
    """Every kind-branching expression in `tree`, as (line, source)."""
    found = [
        (node.lineno, ast.unparse(node))
        for node in ast.walk(tree)
        if _tests_a_kind_field(node) or _reads_a_kind_flag(node) or _names_a_kind(node)
    ]
    found += [
        (test.lineno, ast.unparse(test))
        for test in _truth_tests(tree)
        if isinstance(test, ast.Attribute) and test.attr in SPEC_FIELDS | RECORD_FIELDS
    ]
    return sorted(found)


def counted() -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = {}
    for root in SCANNED:
        for path in sorted(root.rglob("*.py")):
            if path.is_relative_to(KINDS):
                continue
            found = branches(ast.parse(path.read_text()))
            if found:
                out[str(path.relative_to(ROOT))] = found
    return out


def test_kind_branches_outside_the_kinds_stay_under_the_ceiling() -> None:
    found = counted()
    total = sum(len(v) for v in found.values())
    listing = "\n".join(
        f"{path}:{line}: {text}" for path, hits in found.items() for line, text in hits
    )
    per_file = ", ".join(f"{p.rsplit('/', 1)[-1]} {len(h)}" for p, h in found.items())
    print(f"kind branches outside shepherd/kinds: {total} ({per_file})")
    assert total <= CEILING, (
        f"{total} places branch on a step's kind (ceiling {CEILING}):\n{listing}"
    )


def test_the_counter_sees_each_form() -> None:
    source = """
if spec.map is not None: pass
if rec.child_id is None: pass
if spec.is_task: pass
if kind_of(spec).rests: pass
if kind.starts_children(spec): pass
if kind_of(spec).at_deadline(rec, 0): pass
if spec.condition is not None: pass
if kind_of(spec).name == "wait": pass
if isinstance(kind, Approval | Signal): pass
if isinstance(spec, StepSpec): pass
x = spec.approval.timeout_seconds if spec.approval else 0
"""
    assert [line for line, _ in branches(ast.parse(source))] == [2, 3, 4, 5, 6, 9, 10, 12]
