"""One agent worker process: polls its pool's queue like the Lambda SQS event source mapping
and calls the real agent handler. A crash is a real process death; the parent starts a new
worker in its place. A standby worker (`--standby`) is started ahead with everything but the
agents imported, so that changed agent code runs within a second of being saved."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

from shepherd_cli.lambda_kit import local_context, sqs_event


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pool", required=True)
    parser.add_argument("--queue-url", required=True)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--function-timeout", type=int, default=60)
    parser.add_argument(
        "--standby",
        action="store_true",
        help="import everything but the agents, then wait for a line on stdin to start (EOF: exit)",
    )
    args = parser.parse_args()

    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    import boto3
    from shepherd.keys import POOLS_PK
    from shepherd.settings import Settings
    from shepherd_handlers import agent

    sqs = boto3.client("sqs")
    dynamodb = boto3.client("dynamodb")
    table = Settings.from_env().table
    arn = f"arn:aws:sqs:us-east-1:000000000000:shepherd-{args.pool}"
    if args.standby and not sys.stdin.readline():
        return 0  # discarded before it was needed
    # The agent modules are imported by the engine at the first batch: the code as it is now.

    def enabled() -> bool:
        """A paused pool's event source mapping is disabled: it receives nothing; so is the
        mapping of a pool whose circuit breaker is open."""
        item = dynamodb.get_item(
            TableName=table, Key={"pk": {"S": POOLS_PK}, "sk": {"S": args.pool}}
        ).get("Item", {})
        if item.get("circuit", {}).get("S") == "open":
            return False
        return not item.get("paused", {}).get("BOOL", False)

    while not stopping:
        if not enabled():
            time.sleep(0.5)
            continue
        got = sqs.receive_message(
            QueueUrl=args.queue_url,
            MaxNumberOfMessages=min(10, args.batch_size),
            WaitTimeSeconds=1,
            AttributeNames=["All"],
        )
        messages = got.get("Messages", [])
        if not messages:
            continue
        # Paused while this poll waited, or replaced by newer code (a reload): the messages go
        # back unprocessed, for the pool's running code.
        if stopping or not enabled():
            sqs.change_message_visibility_batch(
                QueueUrl=args.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                    for i, m in enumerate(messages)
                ],
            )
            continue
        event = sqs_event(messages, arn, received=True)
        context = local_context(f"shepherd-{args.pool}", args.function_timeout)
        try:
            reply = agent.handler(event, context)
            failed = {f["itemIdentifier"] for f in reply.get("batchItemFailures", [])}
        except Exception as exc:
            print(json.dumps({"worker_error": repr(exc)}), file=sys.stderr, flush=True)
            continue
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=args.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)
                ],
            )
        # Failed items stay in flight until their visibility timeout, then come back;
        # after maxReceiveCount SQS moves them to the pool's dead-letter queue.
    return 0


if __name__ == "__main__":
    sys.exit(main())
