"""The sans-IO client connection (``overlay.client.connection``): how a signed publisher
chooses packet numbers when the root answers that its number is taken."""

from __future__ import annotations

from overlay.client.connection import ClientConnection, SignedStream
from overlay.client.protocol import (
    PROTOCOL_VERSION,
    Publish,
    Welcome,
    decode_request,
    encode_event,
)
from overlay.core.events import PublishAcked, PublishCollided
from overlay.runtime.framing import FrameReader


def _connected() -> ClientConnection:
    connection = ClientConnection()
    connection.receive_data(encode_event(Welcome(0, PROTOCOL_VERSION, bytes(32), 1 << 20)))
    connection.data_to_send()  # the Hello
    return connection


def _acked_at(connection: ClientConnection, stream: SignedStream, number: int) -> None:
    """One publish, acknowledged as ``number`` after a collision: the connection's counter
    now stands at ``number + 1`` (as under a root that numbered that far, then crashed)."""
    key = stream.stream.key
    uid = connection.publish(stream, b"before")
    (sent,) = _publishes(connection)
    connection.receive_data(encode_event(PublishCollided(key, uid, sent.packet or 0, number)))
    _publishes(connection)
    connection.receive_data(encode_event(PublishAcked(key, uid, number)))
    assert connection.outcome(uid) == number


def _publishes(connection: ClientConnection) -> list[Publish]:
    reader = FrameReader(1 << 24)
    requests = [decode_request(body) for body in reader.feed(connection.data_to_send())]
    return [r for r in requests if isinstance(r, Publish)]


def test_a_counter_that_ran_ahead_of_the_root_comes_back_within_one_round_trip() -> None:
    """A root that restarted numbers lower than this connection's counter (which ran ahead
    while it retried): the first collision brings the counter back to the root's number, the
    retry is taken, and the next publish is numbered after it."""
    stream = SignedStream.generate("wedge")
    key = stream.stream.key
    connection = _connected()
    _acked_at(connection, stream, 31_401)
    first = connection.publish(stream, b"a")
    (sent,) = _publishes(connection)
    assert sent.packet == 31_402
    connection.receive_data(encode_event(PublishCollided(key, first, 31_402, 5_091)))
    (retry,) = _publishes(connection)
    assert (retry.uid, retry.packet) == (first, 5_091)
    connection.receive_data(encode_event(PublishAcked(key, first, 5_091)))
    assert connection.outcome(first) == 5_091
    second = connection.publish(stream, b"b")
    (sent,) = _publishes(connection)
    assert (sent.uid, sent.packet) == (second, 5_092)


def test_a_retry_never_takes_a_number_a_later_publish_of_ours_holds() -> None:
    """Three pipelined publishes, the first's number taken by another publisher: the root
    gives its suggestion to the second, so the first retries after all three."""
    stream = SignedStream.generate("pipelined")
    key = stream.stream.key
    connection = _connected()
    uids = [connection.publish(stream, bytes([i])) for i in range(3)]
    assert [p.packet for p in _publishes(connection)] == [0, 1, 2]
    connection.receive_data(encode_event(PublishCollided(key, uids[0], 0, 1)))
    (retry,) = _publishes(connection)
    assert (retry.uid, retry.packet) == (uids[0], 3)
    later = connection.publish(stream, b"later")
    (sent,) = _publishes(connection)
    assert (sent.uid, sent.packet) == (later, 4)


def test_retries_of_a_run_ahead_pipeline_take_distinct_numbers() -> None:
    """Two publishes in flight, both ahead of a restarted root: the first comes down to the
    root's number, the second to the one after, never both to the same."""
    stream = SignedStream.generate("both-ahead")
    key = stream.stream.key
    connection = _connected()
    _acked_at(connection, stream, 99)
    a, b = connection.publish(stream, b"a"), connection.publish(stream, b"b")
    assert [p.packet for p in _publishes(connection)] == [100, 101]
    connection.receive_data(encode_event(PublishCollided(key, a, 100, 7)))
    connection.receive_data(encode_event(PublishCollided(key, b, 101, 7)))
    assert [(p.uid, p.packet) for p in _publishes(connection)] == [(a, 7), (b, 8)]
