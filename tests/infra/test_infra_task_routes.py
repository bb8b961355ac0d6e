"""On API Gateway: the callback routes take the task token in a header it requires, and no
resource has a token in its path (the former `/tasks/{token}/...` routes are gone: issue
35.1)."""

from __future__ import annotations

from typing import Any

from infra_support import Synth
from shepherd import routes


def _paths(synth: Synth) -> dict[str, str]:
    """Resource logical ID -> its full path, from the PathPart chain."""
    resources = synth.of_type("AWS::ApiGateway::Resource")

    def path(logical_id: str) -> str:
        props = resources[logical_id]["Properties"]
        parent = props["ParentId"]
        above = path(parent["Ref"]) if isinstance(parent, dict) and "Ref" in parent else ""
        return f"{above}/{props['PathPart']}"

    return {logical_id: path(logical_id) for logical_id in resources}


def _methods(synth: Synth) -> dict[str, dict[str, Any]]:
    paths = _paths(synth)
    return {
        f"{m['Properties']['HttpMethod']} {paths[m['Properties']['ResourceId']['Ref']]}": m[
            "Properties"
        ]
        for m in synth.of_type("AWS::ApiGateway::Method").values()
        if "Ref" in m["Properties"]["ResourceId"]
    }


def test_callbacks_require_the_token_header(shepherd: Synth) -> None:
    methods = _methods(shepherd)
    header = f"method.request.header.{routes.TASK_TOKEN_HEADER}"
    for action in routes.TASK_ACTIONS:
        method = methods[f"POST /tasks/{action}"]
        assert method["RequestParameters"] == {header: True}
        assert method["AuthorizationType"] == "AWS_IAM"
        assert method["RequestValidatorId"]  # API Gateway refuses a request without it (400)


def test_no_route_takes_a_token_in_its_path(shepherd: Synth) -> None:
    assert {label for label in _methods(shepherd) if "{token}" in label} == set()
    assert set(_paths(shepherd).values()) >= {f"/tasks/{a}" for a in routes.TASK_ACTIONS}
    assert not [p for p in _paths(shepherd).values() if p.startswith("/tasks/{")]
