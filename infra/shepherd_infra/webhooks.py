"""Webhooks without code: selected lifecycle events to HTTPS endpoints, from CDK context.

    npx cdk deploy -c webhooks='[{"name": "crm", "url": "https://crm.example.com/hooks/shepherd",
        "detail_types": ["WorkflowSucceeded", "WorkflowFailed"],
        "header": "X-Api-Key",
        "secret_arn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:crm-key-AbCdEf"}]'

Per webhook: an EventBridge connection (the API key read from the named Secrets Manager
secret at deploy time, or, without one, a header naming the webhook: a connection always
authorizes), an API destination (POST, rate limited), and a rule on Shepherd's bus matching
Shepherd's own events of the selected detail-types, whose target retries for a day and then
sends the event to the webhook's DLQ (alarmed). Each rule's role may invoke its own
destination and nothing else. The body is the whole event: a subscriber deduplicates on
`detail.event_id` (events are delivered at least once, docs/api.md).

The context is validated at synth: https only, known detail-types (`shepherd.model.EVENT_TYPES`),
header and secret together, unique names, the secret in the stack's region (or, for a stack
without one, a template rule refusing the deploy elsewhere); a JSON secret names its field
(`secret_field`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from aws_cdk import (
    Aws,
    CfnRule,
    CfnRuleAssertion,
    Duration,
    Fn,
    SecretValue,
    Stack,
    Token,
    aws_events,
    aws_events_targets,
    aws_sqs,
)
from constructs import Construct
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from shepherd.model import EVENT_TYPES
from shepherd.observability import EVENT_SOURCE

from shepherd_infra import config
from shepherd_infra.nag import acknowledge

MAX_EVENT_AGE = Duration.hours(24)  # EventBridge's longest: an endpoint may be down for hours
RETRY_ATTEMPTS = 185  # EventBridge's most (with backoff, spread over MAX_EVENT_AGE)
DLQ_RETENTION = Duration.days(14)
DEFAULT_RATE_PER_SECOND = 10
NAME_HEADER = "X-Shepherd-Webhook"  # sent when no API key is configured
_SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[\w/+=.@-]+$")
_HEADER = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,256}$")  # an HTTP token


class WebhookConfig(BaseModel):
    """One webhook, as the `webhooks` context gives it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9-]{0,39}$")
    url: str
    detail_types: tuple[str, ...] = Field(min_length=1)
    header: str | None = None
    secret_arn: str | None = None
    # A secret stored as JSON (`{"apiKey": "..."}`): the field holding the API key. Without it
    # the whole secret string is the key.
    secret_field: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,128}$")
    rate_per_second: int = Field(default=DEFAULT_RATE_PER_SECOND, ge=1, le=300)

    @field_validator("url")
    @classmethod
    def _https(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"must be an https:// URL with a host, got {url!r}")
        if parts.username or parts.password:
            raise ValueError("must not carry credentials: use header and secret_arn")
        return url

    @field_validator("detail_types")
    @classmethod
    def _known(cls, types: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(types) - EVENT_TYPES)
        if unknown:
            raise ValueError(f"unknown detail-types {unknown}; known: {sorted(EVENT_TYPES)}")
        if len(set(types)) != len(types):
            raise ValueError("lists a detail-type twice")
        return types

    @field_validator("header")
    @classmethod
    def _header(cls, header: str | None) -> str | None:
        if header is not None and not _HEADER.match(header):
            raise ValueError(f"{header!r} is not an HTTP header name")
        return header

    @field_validator("secret_arn")
    @classmethod
    def _secret(cls, arn: str | None) -> str | None:
        if arn is not None and not _SECRET_ARN.match(arn):
            raise ValueError(f"{arn!r} is not a Secrets Manager secret ARN")
        return arn

    @model_validator(mode="after")
    def _key_whole(self) -> WebhookConfig:
        if (self.header is None) != (self.secret_arn is None):
            raise ValueError("header and secret_arn go together (the API key's header, its value)")
        if self.secret_field is not None and self.secret_arn is None:
            raise ValueError("secret_field names a field of the secret_arn's JSON: give both")
        return self

    @property
    def secret_region(self) -> str | None:
        return self.secret_arn.split(":")[3] if self.secret_arn else None


_WEBHOOKS = TypeAdapter(list[WebhookConfig])


def parse_webhooks(value: Any) -> list[WebhookConfig]:
    """The `webhooks` context (JSON text from `-c`, or a list from cdk.json); [] when unset.
    Raises ValueError naming the context and what is wrong."""
    if value is None or value in ("", []):
        return []
    try:
        data = json.loads(value) if isinstance(value, str) else value
        hooks = _WEBHOOKS.validate_python(data)
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ValueError(f"context {config.CTX_WEBHOOKS!r} is invalid: {exc}") from None
    names = [h.name.lower() for h in hooks]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"context {config.CTX_WEBHOOKS!r}: webhook names repeat: {duplicates}")
    return hooks


class Webhook(Construct):
    """One webhook: connection, API destination, rule, DLQ."""

    def __init__(
        self, scope: Construct, construct_id: str, *, hook: WebhookConfig, bus: aws_events.IEventBus
    ) -> None:
        super().__init__(scope, construct_id)
        self.hook = hook
        if hook.header is not None and hook.secret_arn is not None:
            _same_region(self, hook)
            authorization = aws_events.Authorization.api_key(
                hook.header,
                SecretValue.secrets_manager(hook.secret_arn, json_field=hook.secret_field),
            )
        else:
            # A connection always authorizes: without a key, a header that names the webhook.
            authorization = aws_events.Authorization.api_key(
                NAME_HEADER, SecretValue.unsafe_plain_text(hook.name)
            )
        self.connection = aws_events.Connection(
            self,
            "Connection",
            authorization=authorization,
            description=f"Shepherd webhook {hook.name}",
        )
        self.destination = aws_events.ApiDestination(
            self,
            "Destination",
            connection=self.connection,
            endpoint=hook.url,
            http_method=aws_events.HttpMethod.POST,
            rate_limit_per_second=hook.rate_per_second,
            description=f"Shepherd webhook {hook.name}",
        )
        self.dlq = aws_sqs.Queue(
            self,
            "Dlq",
            encryption=aws_sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
        )
        for rule, reason in (
            ("AwsSolutions-SQS3", "This queue is itself the webhook target's DLQ"),
            (
                "Serverless-SQSRedrivePolicy",
                "This queue is itself the webhook target's DLQ; it alarms when not empty",
            ),
        ):
            acknowledge(self.dlq, rule, reason)
        self.rule = aws_events.Rule(
            self,
            "Rule",
            event_bus=bus,
            description=f"Shepherd events {', '.join(hook.detail_types)} to webhook {hook.name}",
            event_pattern=aws_events.EventPattern(
                source=[EVENT_SOURCE], detail_type=list(hook.detail_types)
            ),
            targets=[
                aws_events_targets.ApiDestination(
                    self.destination,
                    dead_letter_queue=self.dlq,
                    max_event_age=MAX_EVENT_AGE,
                    retry_attempts=RETRY_ATTEMPTS,
                )
            ],
        )


def _same_region(scope: Construct, hook: WebhookConfig) -> None:
    """CloudFormation resolves a secret's dynamic reference in the stack's own region: a secret
    elsewhere fails the deploy. A stack with a region is checked now; an environment-agnostic
    one gets a template rule that refuses the deploy before it changes anything."""
    stack = Stack.of(scope)
    region = hook.secret_region
    fix = (
        f"webhook {hook.name}: its secret is in {region}, and CloudFormation reads a secret in "
        "the stack's own region only; replicate it into the stack's region (Secrets Manager "
        "replication) and give that replica's ARN"
    )
    if not Token.is_unresolved(stack.region):
        if stack.region != region:
            raise ValueError(f"{fix} ({stack.region})")
        return
    CfnRule(
        scope,
        "SecretRegion",
        assertions=[
            CfnRuleAssertion(
                assert_=Fn.condition_equals(Aws.REGION, region), assert_description=fix
            )
        ],
    )


class Webhooks(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        hooks: Sequence[WebhookConfig],
        bus: aws_events.IEventBus,
    ) -> None:
        super().__init__(scope, construct_id)
        self.hooks = [Webhook(self, hook.name, hook=hook, bus=bus) for hook in hooks]
