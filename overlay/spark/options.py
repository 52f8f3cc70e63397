"""The ``overlay`` sink's options: parsed and checked once, on the driver, into one value.

Spark hands a data source its options as strings with lower-cased keys (``rowsPerPacket``
arrives as ``rowsperpacket``), so every name here is matched case-insensitively and every
value is parsed from text. Each mistake is reported as one ``OverlaySinkError`` naming the
option, what it must be and what it was, before any task runs; an option this sink does not
know is a mistake too (a misspelt ``rowsPerPakcet`` silently ignored would be worse).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from keyspace.stream_key import StreamAddressError, StreamKey
from overlay.client.connection import NodeUnreachable, format_address, parse_address
from overlay.client.protocol import DEFAULT_CLIENT_PORT
from overlay.messages import MAX_PACKET, MAX_PAYLOAD
from overlay.spark.rows import (
    DEFAULT_BYTES_PER_PACKET,
    DEFAULT_ROWS_PER_PACKET,
    MIN_BYTES_PER_PACKET,
)

DEFAULT_NODE = f"127.0.0.1:{DEFAULT_CLIENT_PORT}"
DEFAULT_TIMEOUT = 30.0  # seconds for any one answer from the node (the blocking client's)
DEFAULT_MAX_IN_FLIGHT = 1_000  # unanswered publishes a task keeps in its pipeline
MAX_RUN_ID = 200  # characters; a run id is a label, not a payload

# Options Spark itself adds (``save(path)``, ``checkpointLocation``): not ours, not errors.
_SPARK_OWN = frozenset({"path", "checkpointlocation", "queryname"})

ON_ABORT = ("keep", "abort")


class OverlaySinkError(ValueError):
    """A Spark job's use of the ``overlay`` sink is wrong (an option, the DataFrame's
    schema, an unreachable node) or a publish failed; the message says which and how."""


class Unpublishable(OverlaySinkError):
    """A task's rows that no retry of it can publish (a row larger than a packet): the
    task reports it to the driver rather than fail, since Spark would retry it in vain."""


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Everything a writer needs, already checked. ``nodes`` are ``host:port`` strings;
    partition ``p`` publishes through ``nodes[p % len(nodes)]``."""

    stream: StreamKey
    nodes: tuple[str, ...]
    value_column: str = "value"
    key_column: str | None = None
    key_file: str | None = None
    rows_per_packet: int = DEFAULT_ROWS_PER_PACKET
    bytes_per_packet: int = DEFAULT_BYTES_PER_PACKET
    run_id: str | None = None
    epoch: int | None = None
    epoch_offset: int = 0
    on_abort: str = "keep"
    timeout: float = DEFAULT_TIMEOUT
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT

    def node_for(self, partition: int) -> str:
        return self.nodes[partition % len(self.nodes)]

    @property
    def packing(self) -> str:
        """What decides where packets are cut; part of every data uid (``uids.py``)."""
        keyed = "keyed" if self.key_column is not None else "plain"
        return f"{self.rows_per_packet}/{self.bytes_per_packet}/{keyed}"


# option name as documented -> its SinkOptions field
_NAMES = {
    "stream": "stream",
    "node": "nodes",
    "valueColumn": "value_column",
    "keyColumn": "key_column",
    "keyFile": "key_file",
    "rowsPerPacket": "rows_per_packet",
    "bytesPerPacket": "bytes_per_packet",
    "runId": "run_id",
    "epoch": "epoch",
    "epochOffset": "epoch_offset",
    "onAbort": "on_abort",
    "timeout": "timeout",
    "maxInFlight": "max_in_flight",
}
_BY_LOWER = {name.lower(): name for name in _NAMES}


def parse_options(raw: Mapping[str, str], *, streaming: bool) -> SinkOptions:
    """Check the options of one write (``streaming`` for ``writeStream``); OverlaySinkError
    names the first problem. Nothing here touches the network (``probe_nodes`` does)."""
    given: dict[str, str] = {}
    for key, value in raw.items():
        name = _BY_LOWER.get(key.lower())
        if name is None:
            if key.lower() in _SPARK_OWN or key.lower().startswith("spark."):
                continue
            known = ", ".join(_NAMES)
            raise OverlaySinkError(f"overlay sink: unknown option {key!r} (known: {known})")
        given[name] = value
    if "stream" not in given or not given["stream"].strip():
        raise OverlaySinkError(
            "overlay sink: option 'stream' is required: the stream's address, e.g. "
            ".option('stream', 'ovl:open/prices')"
        )
    try:
        stream = StreamKey.parse(given["stream"].strip())
    except StreamAddressError as error:
        raise OverlaySinkError(f"overlay sink: option 'stream': {error}") from None
    if streaming and ("runId" in given or "epoch" in given):
        raise OverlaySinkError(
            "overlay sink: options 'runId' and 'epoch' are for batch writes; a streaming "
            "query's micro-batches are its epochs and its query id names its run"
        )
    if not streaming and "epochOffset" in given:
        raise OverlaySinkError(
            "overlay sink: option 'epochOffset' is for streaming writes; a batch write "
            "names its epoch with option 'epoch'"
        )
    key_file = given.get("keyFile")
    if stream.is_signed and not key_file:
        raise OverlaySinkError(
            f"overlay sink: {stream.address} is a signed stream: option 'keyFile' must name "
            "its signing key file (overlay keygen --stream NAME)"
        )
    if not stream.is_signed and key_file:
        raise OverlaySinkError(
            f"overlay sink: {stream.address} is an open stream: it takes no 'keyFile'"
        )
    run_id = given.get("runId")
    if run_id is not None and not 0 < len(run_id) <= MAX_RUN_ID:
        raise OverlaySinkError(
            f"overlay sink: option 'runId' must be 1 to {MAX_RUN_ID} characters, got {len(run_id)}"
        )
    on_abort = given.get("onAbort", "keep").lower()
    if on_abort not in ON_ABORT:
        raise OverlaySinkError(
            f"overlay sink: option 'onAbort' must be 'keep' or 'abort', got {on_abort!r}"
        )
    epoch = _integer(given, "epoch", 0, MAX_PACKET, 0) if "epoch" in given else None
    return SinkOptions(
        stream=stream,
        nodes=_nodes(given.get("node", DEFAULT_NODE)),
        value_column=_column(given, "valueColumn") or "value",
        key_column=_column(given, "keyColumn"),
        key_file=key_file,
        rows_per_packet=_integer(given, "rowsPerPacket", 1, 10**9, DEFAULT_ROWS_PER_PACKET),
        bytes_per_packet=_integer(
            given, "bytesPerPacket", MIN_BYTES_PER_PACKET, MAX_PAYLOAD, DEFAULT_BYTES_PER_PACKET
        ),
        run_id=run_id,
        epoch=epoch,
        epoch_offset=_integer(given, "epochOffset", 0, MAX_PACKET, 0),
        on_abort=on_abort,
        timeout=_seconds(given, "timeout", DEFAULT_TIMEOUT),
        max_in_flight=_integer(given, "maxInFlight", 1, 16_384, DEFAULT_MAX_IN_FLIGHT),
    )


def _nodes(text: str) -> tuple[str, ...]:
    nodes = tuple(part.strip() for part in text.split(",") if part.strip())
    if not nodes:
        raise OverlaySinkError(
            "overlay sink: option 'node' must name a node's client port as host:port "
            "(or several, comma-separated)"
        )
    parsed = []
    for node in nodes:
        try:
            # A port is required, as Kafka's bootstrap.servers requires one: a node has two
            # ports (peers and clients), and a default silently taken is the wrong one as
            # often as not.
            parsed.append(format_address(*parse_address(node, default_port=None)))
        except NodeUnreachable as error:
            raise OverlaySinkError(
                f"overlay sink: option 'node': {error}, the node's client port (e.g. "
                f"127.0.0.1:{DEFAULT_CLIENT_PORT}, which 'overlay node' prints as 'clients')"
            ) from None
    return tuple(parsed)


def _column(given: Mapping[str, str], name: str) -> str | None:
    value = given.get(name)
    if value is None:
        return None
    if not value.strip():
        raise OverlaySinkError(f"overlay sink: option {name!r} must name a column, got ''")
    return value.strip()


def _integer(given: Mapping[str, str], name: str, low: int, high: int, default: int) -> int:
    text = given.get(name)
    if text is None:
        return default
    try:
        value = int(text.strip().replace("_", ""))
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise OverlaySinkError(
            f"overlay sink: option {name!r} must be an integer in [{low}, {high}], got {text!r}"
        )
    return value


def _seconds(given: Mapping[str, str], name: str, default: float) -> float:
    text = given.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise OverlaySinkError(
            f"overlay sink: option {name!r} must be a positive number of seconds, got {text!r}"
        )
    return value
