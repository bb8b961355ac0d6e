"""Pausing a pool on AWS: its event source mapping is found by its agent function's name (the
deployment passes a prefix, not a list of ids that grows with every pool)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from botocore.stub import Stubber
from shepherd.adapters.lambda_esm import EventSourceMappingControl
from shepherd.errors import DeliveryError
from shepherd.settings import Settings

PREFIX = "Shepherd-277b11e5-5d8a0c1e-"
PAYMENTS = "0c1d2e3f-0000-4000-8000-00000000a001"
INVENTORY = "0c1d2e3f-0000-4000-8000-00000000a002"
OTHER = "0c1d2e3f-0000-4000-8000-00000000a003"


@pytest.fixture
def stubbed() -> Iterator[tuple[object, Stubber]]:
    client = boto3.client("lambda", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def _listed(stubber: Stubber, function: str, uuids: list[str]) -> None:
    stubber.add_response(
        "list_event_source_mappings",
        {"EventSourceMappings": [{"UUID": u} for u in uuids]},
        {"FunctionName": function},
    )


def test_a_pools_mapping_is_found_by_its_functions_name_once(
    stubbed: tuple[object, Stubber],
) -> None:
    client, stubber = stubbed
    _listed(stubber, f"{PREFIX}payments", [PAYMENTS])
    stubber.add_response("update_event_source_mapping", {}, {"UUID": PAYMENTS, "Enabled": False})
    stubber.add_response("update_event_source_mapping", {}, {"UUID": PAYMENTS, "Enabled": True})
    control = EventSourceMappingControl(client, {}, PREFIX)
    control.set_enabled("payments", False)
    control.set_enabled("payments", True)  # no second lookup


@pytest.mark.parametrize("uuids", [[], [PAYMENTS, OTHER]])
def test_no_mapping_or_two_is_a_clear_error(
    stubbed: tuple[object, Stubber], uuids: list[str]
) -> None:
    client, stubber = stubbed
    _listed(stubber, f"{PREFIX}payments", uuids)
    control = EventSourceMappingControl(client, {}, PREFIX)
    with pytest.raises(DeliveryError, match=f"pool 'payments'.*{PREFIX}payments.*{len(uuids)}"):
        control.set_enabled("payments", False)


def test_ids_given_directly_are_used_and_nothing_else(stubbed: tuple[object, Stubber]) -> None:
    client, stubber = stubbed
    stubber.add_response("update_event_source_mapping", {}, {"UUID": INVENTORY, "Enabled": False})
    control = EventSourceMappingControl(client, {"inventory": INVENTORY})
    control.set_enabled("inventory", False)
    with pytest.raises(DeliveryError, match="no event source mapping configured for pool 'x'"):
        control.set_enabled("x", False)


def test_queue_urls_are_derived_for_the_deployments_pools_and_its_retired_ones() -> None:
    settings = Settings(
        table="shepherd",
        definitions_dir="/opt/statemachines",
        queue_url_prefix="https://sqs.us-east-1.amazonaws.com/123456789012/S-1-Q-",
        retired_pools=("legacy",),
    )
    assert settings.queue_urls_for(["payments"]) == {
        "payments": "https://sqs.us-east-1.amazonaws.com/123456789012/S-1-Q-payments",
        "legacy": "https://sqs.us-east-1.amazonaws.com/123456789012/S-1-Q-legacy",
    }
    assert Settings.from_env(settings.to_env()).queue_urls_for(["payments"]) == (
        settings.queue_urls_for(["payments"])
    )
    listed = Settings(table="shepherd", definitions_dir="/x", queue_urls={"a": "http://q/a"})
    assert listed.queue_urls_for(["a", "b"]) == {"a": "http://q/a"}  # no prefix: none derived
