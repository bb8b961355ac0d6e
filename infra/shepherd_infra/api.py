"""The scheduler API: a REST API with IAM (SigV4) authorization on every method."""

from __future__ import annotations

from aws_cdk import aws_apigateway, aws_lambda
from constructs import Construct
from shepherd.observability import HANDLER_API, HANDLER_CALLBACKS
from shepherd.topology import TABLE

from shepherd_infra import config
from shepherd_infra.access import Access
from shepherd_infra.api_logging import acknowledge_logging_off, stage_options
from shepherd_infra.nag import acknowledge
from shepherd_infra.runtime import FunctionSpec, LambdaRuntime

START_WORKFLOW_SCHEMA = aws_apigateway.JsonSchema(
    schema=aws_apigateway.JsonSchemaVersion.DRAFT4,
    title="StartWorkflow",
    type=aws_apigateway.JsonSchemaType.OBJECT,
    required=["type", "input"],
    properties={
        "type": aws_apigateway.JsonSchema(type=aws_apigateway.JsonSchemaType.STRING, min_length=1),
        "input": aws_apigateway.JsonSchema(),
        "idempotency_key": aws_apigateway.JsonSchema(
            type=aws_apigateway.JsonSchemaType.STRING, min_length=1, max_length=256
        ),
    },
)


class SchedulerApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        runtime: LambdaRuntime,
        access: Access,
        logging: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.api_function = runtime.function(
            self,
            "ApiHandler",
            FunctionSpec(
                handler=HANDLER_API,
                timeout=config.API_TIMEOUT,
                memory_mb=config.API_MEMORY_MB,
                description="scheduler API",
                extra_env={},
            ),
        )
        # Lists workflows through the owner index; never the watch index.
        access.engine(self.api_function, indexes=[TABLE.list_index])
        self.callbacks_function = runtime.function(
            self,
            "CallbacksHandler",
            FunctionSpec(
                handler=HANDLER_CALLBACKS,
                timeout=config.API_TIMEOUT,
                memory_mb=config.API_MEMORY_MB,
                description="task callbacks (heartbeat, success, failure)",
                extra_env={},
            ),
        )
        access.engine(self.callbacks_function)

        # Logging is opt-in: it needs the account's API Gateway CloudWatch role, which this
        # stack must neither create nor take over (see api_logging).
        self.rest_api = aws_apigateway.RestApi(
            self,
            "RestApi",
            description="Shepherd scheduler API (IAM authorization)",
            endpoint_types=[aws_apigateway.EndpointType.REGIONAL],
            cloud_watch_role=False,
            deploy_options=stage_options(self, logging=logging),
            default_method_options=aws_apigateway.MethodOptions(
                authorization_type=aws_apigateway.AuthorizationType.IAM
            ),
        )
        validator = self.rest_api.add_request_validator(
            "Validator", validate_request_body=True, validate_request_parameters=True
        )
        start_model = self.rest_api.add_model(
            "StartWorkflowModel",
            content_type="application/json",
            model_name="StartWorkflow",
            schema=START_WORKFLOW_SCHEMA,
        )
        for fn in (self.api_function, self.callbacks_function):
            acknowledge(
                fn,
                "Serverless-LambdaDLQ",
                "Invoked synchronously by API Gateway (Lambda proxy): the caller gets the error; "
                "a Lambda DLQ applies to asynchronous invocations only",
            )
        api = _integration(self.api_function)
        callbacks = _integration(self.callbacks_function)

        def method(
            resource: aws_apigateway.IResource,
            verb: str,
            integration: aws_apigateway.Integration,
            path_params: tuple[str, ...] = (),
            model: aws_apigateway.IModel | None = None,
        ) -> None:
            resource.add_method(
                verb,
                integration,
                authorization_type=aws_apigateway.AuthorizationType.IAM,
                request_validator=validator,
                request_parameters={f"method.request.path.{p}": True for p in path_params},
                request_models={"application/json": model} if model else None,
            )

        workflows = self.rest_api.root.add_resource("workflows")
        method(workflows, "POST", api, model=start_model)
        method(workflows, "GET", api)
        workflow = workflows.add_resource("{workflow_id}")
        method(workflow, "GET", api, ("workflow_id",))
        method(workflow.add_resource("cancel"), "POST", api, ("workflow_id",))
        method(workflow.add_resource("retry"), "POST", api, ("workflow_id",))
        definitions = self.rest_api.root.add_resource("definitions")
        method(definitions, "GET", api)
        method(definitions.add_resource("{name}"), "GET", api, ("name",))
        task = self.rest_api.root.add_resource("tasks").add_resource("{token}")
        for outcome in ("heartbeat", "success", "failure"):
            method(task.add_resource(outcome), "POST", callbacks, ("token",))

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


def _integration(fn: aws_lambda.IFunction) -> aws_apigateway.LambdaIntegration:
    # One invoke permission per method for the deployed stage only (no test-invoke permission).
    return aws_apigateway.LambdaIntegration(fn, proxy=True, allow_test_invoke=False)
