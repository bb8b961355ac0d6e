"""Two Shepherds in one account and region (staging beside production, or two constructs in
one stack) never read each other's series: no alarm and no dashboard widget of one is fed by
what the other publishes, and the names people see differ."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pytest
from aws_cdk import CfnElement, Stack
from infra_support import SIDE_BY_SIDE, Placed
from shepherd.observability import NAMESPACE, Metric
from shepherd_infra import Shepherd

# A series: namespace, metric name and its dimensions, with every reference to a resource
# qualified by its stack (a Ref in one stack is never the resource of another).
Series = tuple[str, str, tuple[tuple[str, str], ...]]
# A dashboard search: SEARCH('{<namespace>,<dims>} MetricName="<m>" service="<s>"', ...)
SEARCH = re.compile(r"SEARCH\('\{([^,}]+),[^}]*\} MetricName=\"([^\"]+)\" service=\"([^\"]+)\"'")


@dataclass
class Deployment:
    name: str
    stack: str
    template: dict[str, Any]
    construct: Shepherd

    def resolve(self, value: Any) -> str:
        """A template value as text; references become `<stack>/<logical id>`."""
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and set(value) == {"Ref"}:
            ref = value["Ref"]
            return ref if ref.startswith("AWS::") else f"{self.stack}/{ref}"
        if isinstance(value, dict) and set(value) == {"Fn::GetAtt"}:
            return f"{self.stack}/{value['Fn::GetAtt'][0]}.{value['Fn::GetAtt'][1]}"
        if isinstance(value, dict) and set(value) == {"Fn::Join"}:
            separator, parts = value["Fn::Join"]
            return separator.join(self.resolve(p) for p in parts)
        raise AssertionError(f"cannot resolve {value!r}")

    @cached_property
    def _logical_ids(self) -> frozenset[str]:
        stack = Stack.of(self.construct)
        return frozenset(
            stack.resolve(stack.get_logical_id(c))
            for c in self.construct.node.find_all()
            if isinstance(c, CfnElement)
        )

    def _in_construct(self, logical_id: str) -> bool:
        return logical_id in self._logical_ids

    def read(self) -> set[Series]:
        """Every series an alarm or a dashboard widget of this deployment reads."""
        found: set[Series] = set()
        for logical_id, resource in self.template["Resources"].items():
            if not self._in_construct(logical_id):
                continue
            props = resource.get("Properties", {})
            if resource["Type"] == "AWS::CloudWatch::Alarm":
                stats = [
                    m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m
                ]
                if "MetricName" in props:
                    stats.append(props)
                for metric in stats:
                    dims = tuple(
                        sorted(
                            (d["Name"], self.resolve(d["Value"]))
                            for d in metric.get("Dimensions", [])
                        )
                    )
                    found.add((metric["Namespace"], metric["MetricName"], dims))
            if resource["Type"] == "AWS::CloudWatch::Dashboard":
                body = json.loads(self.resolve(props["DashboardBody"]))
                for widget in body["widgets"]:
                    for line in widget["properties"].get("metrics", []):
                        searches = [
                            p["expression"]
                            for p in line
                            if isinstance(p, dict) and "expression" in p
                        ]
                        if any(e.startswith("SEARCH(") for e in searches):
                            # A per-pool metric graphed by a search: it must name this
                            # deployment's service, or it would draw another's pools too.
                            (search,) = searches
                            match = SEARCH.search(search)
                            assert match, search
                            namespace, metric, service = match.groups()
                            found.add((namespace, metric, (("service", service),)))
                            continue
                        names = [p for p in line if isinstance(p, str)]
                        dims = tuple(sorted(zip(names[2::2], names[3::2], strict=True)))
                        found.add((names[0], names[1], dims))
        return found

    def engine_series(self) -> set[Series]:
        """What this deployment's functions publish through Powertools (EMF): the namespace and
        the `service` dimension their environment gives them."""
        published: set[Series] = set()
        for logical_id, resource in self.template["Resources"].items():
            if resource["Type"] != "AWS::Lambda::Function":
                continue
            if not self._in_construct(logical_id):
                continue
            env = resource["Properties"]["Environment"]["Variables"]
            namespace = self.resolve(env["POWERTOOLS_METRICS_NAMESPACE"])
            service = self.resolve(env["POWERTOOLS_SERVICE_NAME"])
            published |= {(namespace, m.value, (("service", service),)) for m in Metric}
        return published

    def api_name(self) -> str:
        ((_, api),) = [
            (k, r)
            for k, r in self.template["Resources"].items()
            if r["Type"] == "AWS::ApiGateway::RestApi" and self._in_construct(k)
        ]
        return self.resolve(api["Properties"]["Name"])


def _deployments(side_by_side: list[Placed]) -> Iterator[Deployment]:
    """The session's Shepherds side by side (tests/infra/conftest.py) in one region: two
    stacks of one Shepherd each, and two Shepherds in one stack."""
    region = SIDE_BY_SIDE[0][2]
    for placed in side_by_side:
        if placed.region != region:
            continue
        stack_name = placed.stack.stack_name
        for construct in placed.constructs:
            yield Deployment(
                f"{stack_name}/{construct.node.id}", stack_name, placed.template, construct
            )


@pytest.fixture(scope="module")
def deployments(side_by_side: list[Placed]) -> list[Deployment]:
    return list(_deployments(side_by_side))


def test_no_alarm_or_widget_reads_another_deployments_series(deployments: list[Deployment]) -> None:
    assert len(deployments) == 4
    assert sorted(d.name.rpartition("/")[2] for d in deployments) == [
        "Orders",
        "Returns",
        "Shepherd",
        "Shepherd",
    ]
    for mine in deployments:
        reads = mine.read()
        assert any(ns == NAMESPACE for ns, _, _ in reads), "the engine's own metrics are watched"
        assert mine.engine_series() & reads, "and they are the ones its functions publish"
        for other in deployments:
            if other is mine:
                continue
            assert not reads & (other.read() | other.engine_series()), (mine.name, other.name)


def test_each_deployment_names_its_api_apart(deployments: list[Deployment]) -> None:
    names = [d.api_name() for d in deployments]
    assert len(set(names)) == len(names), names
