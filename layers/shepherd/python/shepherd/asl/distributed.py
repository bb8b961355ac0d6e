"""The distributed Map's data (the developer guide's ItemReader, ItemBatcher and ResultWriter):
the items an S3 object holds, the batches a child execution gets, and the files a ResultWriter
writes. Pure: the interpreter reads and writes S3 through ordinary `s3:getObject` and
`s3:putObject` Tasks (`RunTask`), so a driver needs nothing new to run them.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import DATA_LIMIT_EXCEEDED, ITEM_READER_FAILED, StatesError
from .values import dumps

GET_OBJECT = "arn:aws:states:::s3:getObject"
LIST_OBJECTS = "arn:aws:states:::s3:listObjectsV2"
SDK_LIST_OBJECTS = "arn:aws:states:::aws-sdk:s3:listObjectsV2"
MAX_ITEMS = 100_000_000  # ReaderConfig.MaxItems' ceiling
PUT_OBJECT = "arn:aws:states:::s3:putObject"
INPUT_TYPES = ("JSON", "JSONL", "CSV")
MAX_CHILD_INPUT = 256 * 1024
DELIMITERS = {"COMMA": ",", "PIPE": "|", "SEMICOLON": ";", "SPACE": " ", "TAB": "\t"}


def is_distributed(raw: Mapping[str, Any]) -> bool:
    """Whether a Map state's processor runs in DISTRIBUTED mode (child executions)."""
    processor = raw.get("ItemProcessor") or raw.get("Iterator") or {}
    config = processor.get("ProcessorConfig") or {}
    return bool(config.get("Mode") == "DISTRIBUTED")


def _failed(cause: str) -> StatesError:
    return StatesError(ITEM_READER_FAILED, cause)


NON_ITERABLE = "Attempting to map over non-iterable node."
NO_POINTER = (
    "The provided ReaderConfig.ItemsPointer does not match any valid path in the JSON structure."
)


def max_items(value: Any) -> int | None:
    """ReaderConfig.MaxItems (or what its Path or expression gave): a number or numeric text;
    0, nothing, or more than 100,000,000 read every item; a negative one is
    States.ItemReaderFailed "field MaxItems must be positive", unprefixed (the floci
    emulator's AWS-measured tests)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value) if isinstance(value, int | str) else int(float(value))
    except (TypeError, ValueError):
        raise StatesError(
            ITEM_READER_FAILED, "field MaxItems must be positive", passed_on=True
        ) from None
    if number < 0:
        raise StatesError(ITEM_READER_FAILED, "field MaxItems must be positive", passed_on=True)
    return None if number == 0 or number > MAX_ITEMS else number


def listed(contents: Sequence[Mapping[str, Any]], jsonata: bool) -> list[dict[str, Any]]:
    """An `s3:listObjectsV2` reader's items: `{Etag, Key, LastModified, Size, StorageClass}`,
    the Etag quoted as S3 stores it and LastModified in epoch seconds, a double in a JSONPath
    state and an integer in a JSONata one (checked against us-east-1 by the floci emulator)."""
    out = []
    for entry in contents:
        modified: Any = entry.get("LastModified")
        if isinstance(modified, str):
            stamp = _dt.datetime.fromisoformat(modified.replace("Z", "+00:00"))
            seconds = stamp.timestamp()
            modified = int(seconds) if jsonata else float(seconds)
        out.append(
            {
                "Etag": entry.get("ETag"),
                "Key": entry.get("Key"),
                "LastModified": modified,
                "Size": entry.get("Size"),
                "StorageClass": entry.get("StorageClass", "STANDARD"),
            }
        )
    return out


def _pointer(document: Any, pointer: str) -> Any:
    """RFC 6901: `/records/0` in `document` (`""` is the whole document)."""
    node = document
    for raw in pointer.split("/")[1:] if pointer else []:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise _failed(NO_POINTER)
    return node


def entries(result: Any, config: Mapping[str, Any], max_items: int | None) -> list[dict[str, Any]]:
    """Each item an ItemReader read, as the context object's `Map.Item` gives it (`Index`,
    `Value`; `Key` too for a JSON object's entries), at most `max_items` (0 or None: all)."""
    items = items_of(result, config)
    if isinstance(items, dict):
        pairs = list(items.items())
        pairs = pairs[:max_items] if max_items else pairs
        return [{"Index": i, "Key": k, "Value": v} for i, (k, v) in enumerate(pairs)]
    chosen = items[:max_items] if max_items else items
    return [{"Index": i, "Value": v} for i, v in enumerate(chosen)]


def child_input(entry: Mapping[str, Any]) -> Any:
    """A child execution's input without an ItemSelector: the item, or for an object's entry
    `{"Key", "Value"}` (as an emulator measured against AWS gives it)."""
    if "Key" in entry:
        return {"Key": entry["Key"], "Value": entry["Value"]}
    return entry["Value"]


def items_of(result: Any, config: Mapping[str, Any]) -> list[Any] | dict[str, Any]:
    """The items of an object an `s3:getObject` read (its `Body` text), as ReaderConfig says:
    a JSON array, or the array or object ReaderConfig.ItemsPointer points to (an object's
    items are its entries); JSON Lines; or CSV rows as objects of strings named by the header
    row (or by CSVHeaders). A failure is States.ItemReaderFailed in AWS's words (as the floci
    emulator's tests, measured against AWS, quote them)."""
    body = result.get("Body") if isinstance(result, dict) else result
    if not isinstance(body, str):
        raise _failed("The ItemReader did not read a text object")
    kind = config.get("InputType", "JSON")
    if kind == "JSON":
        try:
            document = json.loads(body)
        except ValueError:
            raise _failed("The object the ItemReader read is not JSON") from None
        items = _pointer(document, str(config.get("ItemsPointer") or ""))
        if isinstance(items, list | dict):
            return items
        raise _failed(NON_ITERABLE)
    if kind == "JSONL":
        try:
            return [json.loads(line) for line in body.splitlines() if line.strip()]
        except ValueError:
            raise _failed("A line of the JSONL object is not JSON") from None
    return _csv_rows(body, config)


def _csv_rows(body: str, config: Mapping[str, Any]) -> list[dict[str, str]]:
    delimiter = DELIMITERS.get(config.get("CSVDelimiter", "COMMA"), ",")
    rows = [row for row in csv.reader(io.StringIO(body), delimiter=delimiter) if row]
    if config.get("CSVHeaderLocation", "FIRST_ROW") == "GIVEN":
        headers = list(config.get("CSVHeaders") or [])
    else:
        if not rows:
            return []
        headers, rows = rows[0], rows[1:]
    out = []
    for row in rows:
        if len(row) > len(headers):
            raise _failed(f"The CSV row has {len(row)} fields and the header names {len(headers)}")
        out.append({name: row[i] if i < len(row) else "" for i, name in enumerate(headers)})
    return out


def batches(
    items: Sequence[Any],
    max_items: int | None,
    max_bytes: int | None,
    batch_input: Any,
    has_batch_input: bool,
) -> list[dict[str, Any]]:
    """The child executions' inputs: `{"BatchInput", "Items"}` (BatchInput only when given),
    each with at most `max_items` items and at most `max_bytes` bytes of JSON (at least one
    item each). A child's input is at most 256 KiB whatever the batcher says, and an item over
    it alone is States.DataLimitExceeded (the floci emulator's AWS-measured tests)."""
    limit = min(max_bytes or MAX_CHILD_INPUT, MAX_CHILD_INPUT)

    def batch(members: list[Any]) -> dict[str, Any]:
        if has_batch_input:
            return {"BatchInput": batch_input, "Items": members}
        return {"Items": members}

    empty = len(dumps(batch([])).encode())
    out: list[dict[str, Any]] = []
    current: list[Any] = []
    size = empty
    for item in items:
        grown = len(dumps(item).encode()) + (1 if current else 0)  # the item and its comma
        if empty + grown - (1 if current else 0) > MAX_CHILD_INPUT:
            raise StatesError(
                DATA_LIMIT_EXCEEDED,
                "An item of the Map is larger than a child execution's 256 KiB input limit",
            )
        if current and ((max_items and len(current) >= max_items) or size + grown > limit):
            out.append(batch(current))
            current, size = [], empty
            grown -= 1
        current.append(item)
        size += grown
    if current:
        out.append(batch(current))
    return out


def map_run_arn(state_machine_id: str, label: str, run_id: str) -> str:
    """`arn:aws:states:<region>:<account>:mapRun:<machine>/<label>:<id>`."""
    parts = state_machine_id.split(":")
    region, account, machine = parts[3], parts[4], parts[-1]
    return f"arn:aws:states:{region}:{account}:mapRun:{machine}/{label}:{run_id}"


def child_arns(state_machine_id: str, label: str) -> tuple[str, str]:
    """A Map Run's child executions' state machine ARN (`...:stateMachine:<machine>/<label>`)
    and the ARN its executions' names extend (`...:execution:<machine>/<label>`)."""
    parts = state_machine_id.split(":")
    region, account, machine = parts[3], parts[4], parts[-1]
    base = f"arn:aws:states:{region}:{account}"
    return f"{base}:stateMachine:{machine}/{label}", f"{base}:execution:{machine}/{label}"


def flattened(outputs: Sequence[Any]) -> list[Any]:
    """WriterConfig Transformation FLATTEN: each child's array output spread out."""
    out: list[Any] = []
    for output in outputs:
        out.extend(output if isinstance(output, list) else [output])
    return out


def result_files(
    bucket: str,
    prefix: str,
    run_id: str,
    map_run: str,
    children_arns: tuple[str, str],
    children: Sequence[tuple[Any, Any, bool, str | None, str | None]],
    now: str,
    transformation: str = "NONE",
    output_type: str = "JSON",
) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """What a ResultWriter writes: each status's results file (`SUCCEEDED_0.json`,
    `FAILED_0.json`) and the `manifest.json` that lists them, under `<Prefix>/<run id>/` (the
    Prefix as given: `/csvJobs//` stays), and the Map's output, `{MapRunArn,
    ResultWriterDetails: {Bucket, Key}}` (the manifest's key). Each record is an execution's
    description (Input and Output as JSON text), or with Transformation COMPACT or FLATTEN the
    outputs alone; OutputType JSONL writes one record a line.

    `children`: each child's (input, output, failed, error, cause)."""
    base = prefix if not prefix or prefix.endswith("/") else f"{prefix}/"
    base = f"{base}{run_id}/"
    machine_arn, execution_base = children_arns
    by_status: dict[str, list[Any]] = {"SUCCEEDED": [], "FAILED": []}
    for index, (given, output, failed, error, cause) in enumerate(children):
        status = "FAILED" if failed else "SUCCEEDED"
        if transformation in ("COMPACT", "FLATTEN") and not failed:
            by_status[status].append(output)
            continue
        name = f"{run_id}:{index}"
        record: dict[str, Any] = {
            "ExecutionArn": f"{execution_base}:{name}",
            "Input": dumps(given),
            "InputDetails": {"Included": True},
            "Name": name,
        }
        if failed:
            record["Error"], record["Cause"] = error, cause
        else:
            record["Output"] = dumps(output)
            record["OutputDetails"] = {"Included": True}
        record.update(
            {
                "RedriveCount": 0,
                "RedriveStatus": "NOT_REDRIVABLE",
                "RedriveStatusReason": f"Execution is {status} and cannot be redriven",
                "StartDate": now,
                "StateMachineArn": machine_arn,
                "Status": status,
                "StopDate": now,
            }
        )
        by_status[status].append(record)
    if transformation == "FLATTEN":
        by_status["SUCCEEDED"] = flattened(by_status["SUCCEEDED"])
    files: list[tuple[str, str]] = []
    listed_files: dict[str, list[dict[str, Any]]] = {"FAILED": [], "PENDING": [], "SUCCEEDED": []}
    for status, records in by_status.items():
        if records:
            key = f"{base}{status}_0.json"
            if output_type == "JSONL":
                body = "".join(dumps(r) + "\n" for r in records)
            else:
                body = dumps(records)
            files.append((key, body))
            listed_files[status].append({"Key": key, "Size": len(body.encode())})
    manifest_key = f"{base}manifest.json"
    manifest = {"DestinationBucket": bucket, "MapRunArn": map_run, "ResultFiles": listed_files}
    files.append((manifest_key, dumps(manifest)))
    output = {"MapRunArn": map_run, "ResultWriterDetails": {"Bucket": bucket, "Key": manifest_key}}
    return files, output
