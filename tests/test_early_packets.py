"""Packets that overtake a member's question to its new parent (``early_packets``).

N holds 0..2 and moves below X for W's search (``Restarts.hang_from``); X's head is 4, so N
asks X for 3..4 (``FillRequest``). Packets X sends above the gap before its answer wait for
it, and nothing is announced missed that X then brings."""

from __future__ import annotations

from detached_subtrees import DATA, found_beyond_a_labelled_member
from nodes import KEY, sends

from overlay.core.config import NodeConfig
from overlay.core.early_packets import EarlyPackets
from overlay.core.node import Node
from overlay.messages import FillRequest, PacketsMissed, SubscribeData, SubscribeSucceeded

FILL = NodeConfig().fill_timeout


def data(number: int) -> SubscribeData:
    return SubscribeData(KEY, number, b"p%d" % number, None, DATA, None)


def moved() -> Node:
    node, effects = found_beyond_a_labelled_member(SubscribeSucceeded(81, KEY, 4), held=3)
    assert (b"X", FillRequest(KEY, 3, 4)) in effects
    return node


def down(effects: list, child: bytes = b"D") -> list[object]:
    """What N sent ``child``: packet numbers, and missed ranges as (first, last)."""
    out: list[object] = []
    for peer, message in sends(effects):
        if peer != child:
            continue
        if isinstance(message, SubscribeData):
            out.append(message.packet)
        elif isinstance(message, PacketsMissed):
            out.append((message.first, message.last))
    return out


def test_a_packet_that_overtakes_the_answer_waits_for_it() -> None:
    """X's next packet, 5, comes before its answer with 3 and 4: it waits; the answer comes
    and D gets 3, 4, 5 in order, nothing missed."""
    node = moved()
    assert down(node.receive(1.4, b"X", data(5))) == []
    assert down(node.receive(1.5, b"X", data(3))) == [3]
    assert down(node.receive(1.5, b"X", data(4))) == [4, 5]
    assert node.streams[KEY].early is None and node.streams[KEY].next_in == 6


def test_what_the_parent_says_is_lost_is_announced_and_the_waiting_packets_go_on() -> None:
    node = moved()
    node.receive(1.4, b"X", data(5))
    assert down(node.receive(1.5, b"X", PacketsMissed(KEY, 3, 4))) == [(3, 4), 5]


def test_an_answer_that_never_comes_is_given_up_after_fill_timeout() -> None:
    """X never answers: the wait ends at fill_timeout and the gap is announced missed, as it
    would have been at once without the wait."""
    node = moved()
    node.receive(1.4, b"X", data(5))
    assert down(node.handle_timer(1.3 + FILL / 2)) == []
    assert down(node.handle_timer(1.3 + FILL)) == [(3, 4), 5]


def test_the_wait_is_bounded_by_a_window() -> None:
    early = EarlyPackets(3, 4, token=1, max_packets=2, max_bytes=100)
    assert early.hold(data(5)) and early.hold(data(6)) and early.hold(data(6))
    assert not early.hold(data(7))  # a third packet: past the bounds
    assert early.covers(3) and early.covers(4) and not early.covers(5)
    assert [early.pop_lowest(), early.pop_lowest(), early.pop_lowest()] == [data(5), data(6), None]
