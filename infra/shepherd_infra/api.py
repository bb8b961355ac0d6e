"""The scheduler API: a REST API with IAM (SigV4) authorization on every method.

Resources and methods come from `shepherd.routes` (the list the handlers, the local gateway
and the tests read); API Gateway's own error replies (gateway responses) answer in the API's
error shape, with the request id.
"""

from __future__ import annotations

import json

from aws_cdk import aws_apigateway, aws_lambda
from constructs import Construct
from shepherd import routes
from shepherd.observability import HANDLER_API, HANDLER_CALLBACKS
from shepherd.topology import TABLE

from shepherd_infra import config
from shepherd_infra.access import Access
from shepherd_infra.api_logging import ApiThrottling, acknowledge_logging_off, stage_options
from shepherd_infra.nag import acknowledge
from shepherd_infra.runtime import FunctionSpec, LambdaRuntime


class SchedulerApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        runtime: LambdaRuntime,
        access: Access,
        name: str,
        logging: bool = False,
        detailed_metrics: bool = False,
        memory_mb: int = config.API_MEMORY_MB,
        throttling: ApiThrottling | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.api_function = runtime.function(
            self,
            "ApiHandler",
            FunctionSpec(
                handler=HANDLER_API,
                timeout=config.API_TIMEOUT,
                memory_mb=memory_mb,
                description="scheduler API",
                extra_env={},
            ),
        )
        # Lists workflows through the list indexes, pending approvals through the inbox index,
        # tagged workflows and a signal's matches through by_key; never the watch index.
        access.engine(
            self.api_function,
            indexes=[*TABLE.list_indexes, TABLE.inbox_index, TABLE.key_index],
        )
        # Pausing a pool disables its SQS event source mapping, found by its function's name.
        access.pool_control(self.api_function)
        access.payloads(self.api_function, read=True)
        access.uploads(self.api_function, sign=True)
        self.callbacks_function = runtime.function(
            self,
            "CallbacksHandler",
            FunctionSpec(
                handler=HANDLER_CALLBACKS,
                timeout=config.API_TIMEOUT,
                memory_mb=memory_mb,
                description="task callbacks (heartbeat, success, failure)",
                extra_env={},
            ),
        )
        access.engine(self.callbacks_function)
        access.payloads(self.callbacks_function, read=False)
        access.uploads(self.callbacks_function, sign=False)

        # Logging is opt-in: it needs the account's API Gateway CloudWatch role, which this
        # stack must neither create nor take over (see api_logging).
        self.rest_api = aws_apigateway.RestApi(
            self,
            "RestApi",
            rest_api_name=name,
            description="Shepherd scheduler API (IAM authorization)",
            endpoint_types=[aws_apigateway.EndpointType.REGIONAL],
            cloud_watch_role=False,
            deploy_options=stage_options(
                self, logging=logging, detailed_metrics=detailed_metrics, throttling=throttling
            ),
            default_method_options=aws_apigateway.MethodOptions(
                authorization_type=aws_apigateway.AuthorizationType.IAM
            ),
        )
        # Bodies are validated by the handlers alone (strict JSON, the pydantic models, one
        # error shape): a gateway body model drifted from them and answered in its own shape.
        # The gateway still checks that path parameters are present.
        validator = self.rest_api.add_request_validator(
            "Validator", validate_request_body=False, validate_request_parameters=True
        )
        acknowledge(
            self.rest_api,
            "AwsSolutions-APIG2",
            "Request bodies are validated by the handlers (strict RFC 8259 JSON, depth and size "
            "caps, the pydantic models of docs/openapi.json) and refused in the API's error "
            "shape; a second, gateway-side schema drifts from them. Parameters are validated here",
        )
        for fn in (self.api_function, self.callbacks_function):
            acknowledge(
                fn,
                "Serverless-LambdaDLQ",
                "Invoked synchronously by API Gateway (Lambda proxy): the caller gets the error; "
                "a Lambda DLQ applies to asynchronous invocations only",
            )
        integrations = {
            "api": _integration(self.api_function),
            "callbacks": _integration(self.callbacks_function),
        }
        self.resources: dict[str, aws_apigateway.IResource] = {"": self.rest_api.root}
        for route in routes.ROUTES:
            self._resource(route.resource).add_method(
                route.method,
                integrations[route.target],
                authorization_type=aws_apigateway.AuthorizationType.IAM,
                request_validator=validator,
                request_parameters={
                    **{f"method.request.path.{p}": True for p in route.params},
                    **{f"method.request.header.{h}": True for h in route.headers},
                },
            )
        for error in routes.GATEWAY_ERRORS:
            self.rest_api.add_gateway_response(
                f"Gateway{error.response_type}",
                type=aws_apigateway.ResponseType.of(error.response_type),
                status_code=str(error.status) if error.status else None,
                templates={routes.JSON: gateway_template(error)},
            )

        acknowledge(
            self.rest_api,
            "AwsSolutions-COG4",
            "Every method uses IAM (SigV4) authorization instead of Cognito: callers are AWS "
            "principals (services, operators, agents)",
        )
        acknowledge(
            self.rest_api,
            "AwsSolutions-APIG3",
            "No WAF: the API is IAM-authorized only, so unsigned requests are rejected before "
            "any integration runs; stage throttling bounds signed callers",
        )
        acknowledge_logging_off(self.rest_api, logging=logging)

    def _resource(self, path: str) -> aws_apigateway.IResource:
        """The resource at `path`, creating it and its parents once."""
        if path not in self.resources:
            parent, _, part = path.rpartition("/")
            self.resources[path] = self._resource(parent).add_resource(part)
        return self.resources[path]


def gateway_template(error: routes.GatewayError) -> str:
    """The body of a gateway response: the API's error shape, with API Gateway's request id
    (and its own message where we keep it: `messageString` is already a quoted JSON string)."""
    message = json.dumps(error.message) if error.message else "$context.error.messageString"
    code = json.dumps(error.code)
    return f'{{"error":{{"code":{code},"message":{message},"request_id":"$context.requestId"}}}}'


def _integration(fn: aws_lambda.IFunction) -> aws_apigateway.LambdaIntegration:
    # One invoke permission per function for this API (its methods are all this function's
    # routes), not one per method: 30 methods made 30 resources, and a stack holds 500.
    return aws_apigateway.LambdaIntegration(fn, proxy=True, scope_permission_to_method=False)
