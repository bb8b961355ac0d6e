"""The template and the runtime read the same sources: definitions, settings, topology."""

from __future__ import annotations

from infra_support import EXTRA_POOL, Synth, queue_arn_of, refers_to, render
from shepherd.asl.workflow import INTEGRATIONS_POOL
from shepherd.definitions import load_directory
from shepherd.observability import ENV_POOL, HANDLER_AGENT
from shepherd.settings import (
    ENV_DEFINITIONS_DIR,
    ENV_EVENT_BUS,
    ENV_POOL_FUNCTION_PREFIX,
    ENV_QUEUE_URL_PREFIX,
    ENV_QUEUE_URLS,
    ENV_RETENTION_DAYS,
    ENV_TABLE,
    ENV_WATCH_SHARDS,
    Settings,
)
from shepherd.topology import TABLE, pools
from shepherd_infra import config
from shepherd_infra.runtime import DEFINITIONS_LAYER_DIR

SETTINGS_ENV = {
    ENV_TABLE,
    ENV_QUEUE_URL_PREFIX,
    ENV_POOL_FUNCTION_PREFIX,
    ENV_EVENT_BUS,
    ENV_DEFINITIONS_DIR,
    ENV_WATCH_SHARDS,
    ENV_RETENTION_DAYS,
}


def test_pools_are_exactly_those_the_definitions_name(shepherd: Synth) -> None:
    expected = pools(load_directory(config.DEFINITIONS_DIR))
    assert set(shepherd.construct.pools) == set(expected)
    queues = set(shepherd.of_type("AWS::SQS::Queue"))
    assert queues == {
        shepherd.logical_id(q) for p in shepherd.construct.pools.values() for q in (p.queue, p.dlq)
    } | {
        shepherd.logical_id(shepherd.construct.relay.failures),
        shepherd.logical_id(shepherd.construct.supervisor.ticks),
        # the starts the events function could not make (issue 35.3)
        shepherd.logical_id(shepherd.construct.events.start_failures),
    } | (
        # the definitions' schedules' dead letters, when any definition has a schedule
        set()
        if shepherd.construct.schedules is None
        else {shepherd.logical_id(shepherd.construct.schedules.dlq)}
    )


def test_a_new_pool_in_a_definition_adds_its_queue_dlq_and_function(
    shepherd: Synth, extended: Synth
) -> None:
    assert EXTRA_POOL not in shepherd.construct.pools
    spec = extended.construct.pool_specs[EXTRA_POOL]
    pool = extended.construct.pools[EXTRA_POOL]
    queues = extended.of_type("AWS::SQS::Queue")
    queue = queues[extended.logical_id(pool.queue)]["Properties"]
    assert queue["VisibilityTimeout"] == spec.visibility_timeout_seconds
    assert refers_to(queue["RedrivePolicy"]["deadLetterTargetArn"], extended.logical_id(pool.dlq))
    assert extended.logical_id(pool.dlq) in queues
    agents = {
        f["Properties"]["Environment"]["Variables"][ENV_POOL]: f["Properties"]
        for f in extended.of_type("AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == HANDLER_AGENT
    }
    # The extended app's state machine has service Tasks: Shepherd's integration pool too.
    assert set(agents) == set(shepherd.construct.pools) | {EXTRA_POOL, INTEGRATIONS_POOL}
    # 200 s task + the agent's overhead: the timeout comes from the definition, not from infra.
    assert agents[EXTRA_POOL]["Timeout"] == spec.function_timeout_seconds == 230
    extended.template.resource_count_is(
        "AWS::Lambda::Function", 5 + len(shepherd.construct.pools) + 2
    )
    # + the relay's failures, the supervisor's ticks and the start failures, + the schedules'
    # dead letters if any
    schedules = 0 if extended.construct.schedules is None else 1
    extended.template.resource_count_is(
        "AWS::SQS::Queue", 2 * (len(shepherd.construct.pools) + 2) + 3 + schedules
    )


def test_every_function_gets_the_settings_environment(extended: Synth) -> None:
    expected_keys = set(
        Settings(
            table="t" * 3,
            queue_url_prefix="https://q/",
            pool_function_prefix="f-",
            event_bus="bus",
            definitions_dir="/x",
        ).to_env()
    )
    assert expected_keys == SETTINGS_ENV
    for logical_id in extended.of_type("AWS::Lambda::Function"):
        env = extended.function_env(logical_id)
        assert set(env) >= SETTINGS_ENV, logical_id
        assert env[ENV_DEFINITIONS_DIR] == config.RUNTIME_DEFINITIONS_DIR
        assert config.RUNTIME_DEFINITIONS_DIR == "/opt/statemachines"
        assert env[ENV_TABLE] == {"Ref": extended.logical_id(extended.construct.store.table)}
        assert env[ENV_EVENT_BUS] == {"Ref": extended.logical_id(extended.construct.events.bus)}
        # No list that grows with the pools: the runtime derives each pool's queue URL, and
        # derives the very URL its queue gets.
        assert ENV_QUEUE_URLS not in env, logical_id
        runtime = Settings.from_env({k: render(v) for k, v in env.items()})
        derived = runtime.queue_urls_for(extended.construct.pools)
        for name, pool in extended.construct.pools.items():
            arn = queue_arn_of(extended, pool.queue)
            _, region, account, queue_name = arn.split(":", 2)[2].split(":")
            assert derived[name] == f"https://sqs.{region}.amazonaws.com/{account}/{queue_name}"


def test_table_keys_come_from_topology(shepherd: Synth) -> None:
    ((_, table),) = shepherd.of_type("AWS::DynamoDB::Table").items()
    props = table["Properties"]
    assert [k["AttributeName"] for k in props["KeySchema"]] == [TABLE.partition_key, TABLE.sort_key]
    for index in props["GlobalSecondaryIndexes"]:
        (spec,) = [i for i in TABLE.indexes if i.name == index["IndexName"]]
        assert [k["AttributeName"] for k in index["KeySchema"]] == [
            spec.partition_key,
            spec.sort_key,
        ]
        assert index["Projection"]["ProjectionType"] == spec.projection
    assert props["TimeToLiveSpecification"]["AttributeName"] == TABLE.ttl_attribute


def test_definitions_layer_holds_the_canonical_json_the_runtime_loads(extended: Synth) -> None:
    from rehearsal import CloudAssembly

    assembly = CloudAssembly(extended.outdir, extended.stack.artifact_id)
    (content,) = [
        r["Properties"]["Content"]
        for r in extended.resources.values()
        if r["Type"] == "AWS::Lambda::LayerVersion"
        and r["Properties"]["Description"].startswith("Workflow definitions")
    ]
    shipped_layer = assembly.objects[content["S3Key"]]
    assert [p.name for p in shipped_layer.iterdir()] == ["statemachines"]  # and nothing else
    directory = extended.build_dir / DEFINITIONS_LAYER_DIR / "statemachines"
    shipped = load_directory(directory)
    assert set(shipped) == set(extended.construct.definitions)
    for name, definition in extended.construct.definitions.items():
        assert (directory / f"{name}.json").read_text(encoding="utf-8") == definition.canonical_json
        assert shipped[name].content_hash == definition.content_hash
