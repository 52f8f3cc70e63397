"""The Spark sink's options: parsed case-insensitively (Spark lower-cases the keys), each
mistake one OverlaySinkError naming the option and what it must be."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow")

from keyspace.stream_key import StreamKey
from overlay.messages import PacketKind
from overlay.spark.options import (
    DEFAULT_NODE,
    OverlaySinkError,
    parse_options,
)
from overlay.spark.uids import data_uid, marker_uid

SIGNED = StreamKey.signed(bytes(range(32)), "s").address


def test_defaults_and_lower_cased_keys() -> None:
    options = parse_options(
        {"stream": "ovl:open/a", "rowsperpacket": "10", "BYTESPERPACKET": "1_000"},
        streaming=False,
    )
    assert options.stream == StreamKey.open("a")
    assert options.nodes == (DEFAULT_NODE,)
    assert (options.rows_per_packet, options.bytes_per_packet) == (10, 1000)
    assert options.value_column == "value" and options.key_column is None
    assert options.on_abort == "keep" and options.epoch is None


def test_nodes_spread_partitions() -> None:
    options = parse_options({"stream": "a", "node": "h1:1, h2:2,h3:3"}, streaming=True)
    assert [options.node_for(p) for p in range(5)] == ["h1:1", "h2:2", "h3:3", "h1:1", "h2:2"]


def test_nodes_take_a_tcp_scheme_and_ipv6() -> None:
    options = parse_options({"stream": "a", "node": "tcp://127.0.0.1:7902,[::1]:7"}, streaming=True)
    assert options.nodes == ("127.0.0.1:7902", "[::1]:7")


@pytest.mark.parametrize(
    ("raw", "streaming", "message"),
    [
        ({}, False, "option 'stream' is required"),
        ({"stream": "ovl:nonsense/"}, False, "option 'stream'"),
        ({"stream": "a", "node": "host:notaport"}, False, "'host:notaport': expected host:port"),
        ({"stream": "a", "node": "localhost"}, False, "option 'node': .*'localhost': no port"),
        ({"stream": "a", "node": "h:1,h2"}, False, "option 'node': .*'h2': no port"),
        ({"stream": "a", "node": "http://h:1"}, False, "option 'node': .* is plain TCP"),
        ({"stream": "my stream"}, False, "option 'stream': .* contains whitespace"),
        ({"stream": "http://example/x"}, False, "option 'stream': .* looks like a URL"),
        ({"stream": "a", "node": " , "}, False, "option 'node' must name"),
        ({"stream": "a", "rowsPerPacket": "0"}, False, r"'rowsPerPacket' must be an integer"),
        ({"stream": "a", "bytesPerPacket": "70000"}, False, r"in \[64, 65536\], got '70000'"),
        ({"stream": "a", "maxInFlight": "many"}, False, "'maxInFlight' must be an integer"),
        ({"stream": "a", "timeout": "-1"}, False, "positive number of seconds"),
        ({"stream": "a", "timeout": "nan"}, False, "positive number of seconds"),
        ({"stream": "a", "valueColumn": " "}, False, "must name a column"),
        ({"stream": "a", "onAbort": "retry"}, False, "'keep' or 'abort'"),
        ({"stream": "a", "rowsPerPakcet": "1"}, False, "unknown option 'rowsPerPakcet'"),
        ({"stream": "a", "epoch": "1"}, True, "are for batch writes"),
        ({"stream": "a", "runId": "x"}, True, "are for batch writes"),
        ({"stream": "a", "epochOffset": "1"}, False, "is for streaming writes"),
        ({"stream": "a", "runId": ""}, False, "'runId' must be 1 to 200"),
        ({"stream": SIGNED}, False, "signed stream: option 'keyFile'"),
        ({"stream": "a", "keyFile": "k"}, False, "open stream: it takes no 'keyFile'"),
    ],
)
def test_mistakes_are_named(raw: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(OverlaySinkError, match=message):
        parse_options(raw, streaming=streaming)


def test_spark_own_options_are_ignored() -> None:
    raw = {"stream": "a", "path": "/x", "checkpointLocation": "/c", "spark.whatever": "1"}
    assert parse_options(raw, streaming=True).stream == StreamKey.open("a")


def test_uids_depend_on_every_field_a_retry_keeps_and_nothing_else() -> None:
    base = data_uid("query:q", 3, 1, 7, "10/1000/plain")
    assert base == data_uid("query:q", 3, 1, 7, "10/1000/plain")
    assert 0 <= base < 2**64
    others = {
        data_uid("query:r", 3, 1, 7, "10/1000/plain"),
        data_uid("query:q", 4, 1, 7, "10/1000/plain"),
        data_uid("query:q", None, 1, 7, "10/1000/plain"),
        data_uid("query:q", 3, 2, 7, "10/1000/plain"),
        data_uid("query:q", 3, 1, 8, "10/1000/plain"),
        data_uid("query:q", 3, 1, 7, "10/1001/plain"),
    }
    assert base not in others and len(others) == 6
    key = StreamKey.open("a").key
    closed = marker_uid(key, 5, PacketKind.EPOCH_CLOSED)
    assert closed == marker_uid(key, 5, PacketKind.EPOCH_CLOSED)
    assert closed != marker_uid(key, 5, PacketKind.EPOCH_ABORTED)
    assert closed != marker_uid(key, 6, PacketKind.EPOCH_CLOSED)
