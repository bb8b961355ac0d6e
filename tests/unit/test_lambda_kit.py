"""The one kit of fake Lambda contexts and events (shepherd_cli.lambda_kit)."""

from __future__ import annotations

from shepherd_cli import lambda_kit

MESSAGE = {"MessageId": "m1", "ReceiptHandle": "rh-m1", "Body": "{}"}


def test_a_context_counts_down_unless_its_time_is_fixed() -> None:
    local = lambda_kit.local_context("shepherd-local-supervisor", 70)
    assert 0 < local.get_remaining_time_in_millis() <= 70_000
    assert local.invoked_function_arn == lambda_kit.LOCAL_FUNCTION_ARN
    fixed = lambda_kit.LambdaContext("shepherd-test", remaining_ms=60_000, account="123456789012")
    assert fixed.get_remaining_time_in_millis() == 60_000
    assert fixed.invoked_function_arn == (
        "arn:aws:lambda:us-east-1:123456789012:function:shepherd-test"
    )


def test_an_sqs_batch_of_received_or_made_up_messages() -> None:
    arn = "arn:aws:sqs:eu-west-1:123456789012:shepherd-orders"
    made_up = lambda_kit.sqs_event([MESSAGE], arn)["Records"][0]
    assert made_up["attributes"] == lambda_kit.SQS_ATTRIBUTES
    assert made_up["md5OfBody"] == "0" * 32
    assert made_up["awsRegion"] == "eu-west-1"
    received = lambda_kit.sqs_event([MESSAGE], arn, received=True)["Records"][0]
    assert received["attributes"] == {} and received["md5OfBody"] == ""
    assert received["eventSource"] == "aws:sqs" and received["eventSourceARN"] == arn


def test_eventbridge_events_carry_only_what_is_given() -> None:
    assert set(lambda_kit.scheduled_event()) == {"version", "id", "detail-type", "source", "detail"}
    event = lambda_kit.eventbridge_event(
        "StartWorkflow",
        {"type": "t"},
        source="acme",
        account="1",
        region="r",
        at="now",
        resources=[],
    )
    assert event["time"] == "now" and event["resources"] == [] and event["detail"] == {"type": "t"}


def test_a_rest_event_names_its_caller_and_stage() -> None:
    event = lambda_kit.rest_event(
        "GET",
        "/workflows",
        resource="/workflows",
        path_parameters=None,
        query=None,
        headers={},
        body=None,
        caller_arn="arn:aws:iam::123456789012:user/bench",
        base_path="/v1",
        stage="v1",
        account="123456789012",
    )
    context = event["requestContext"]
    assert context["stage"] == "v1" and context["path"] == "/v1/workflows"
    assert context["identity"]["caller"] == "bench"
    assert lambda_kit.stream_event([{"eventID": "1"}]) == {"Records": [{"eventID": "1"}]}
