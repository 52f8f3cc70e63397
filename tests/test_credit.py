"""A node sends up at most a credit of its clients' publishes per stream and holds the rest
in order (``overlay.core.credit``).

N (0.45) is in KEY's tree under parent P (0.49); its client 1 publishes. The credit is two
publishes (or ``BYTES`` of payload), so the third waits until an answer comes back.
"""

from __future__ import annotations

from flowkit import Calls, Kit
from flowkit import publish as flow_publish
from nodes import KEY, make, meet, own_uid, sends

from overlay.core.config import NodeConfig
from overlay.core.credit import KEPT_PACES, PublishCredit
from overlay.core.effects import Deliver, Effect
from overlay.core.events import PublishAcked, PublishFailed, Subscribed
from overlay.core.local_publishes import LocalPublish
from overlay.core.node import Node
from overlay.core.pace import INITIAL_WINDOW
from overlay.core.streams import State
from overlay.messages import PublishData, PublishError, PublishSucceeded, SubscribeSucceeded

UID = 100
BYTES = 1000
TIMEOUT = 1.0
ATTEMPTS = 2


def member(**config: object) -> Node:
    config.setdefault("publish_credit_packets", 2)
    config.setdefault("publish_credit_bytes", BYTES)
    config.setdefault("publish_timeout", TIMEOUT)
    config.setdefault("publish_attempts", ATTEMPTS)
    node = make(**config)
    meet(node, b"P", 0.49)
    uid = own_uid(node.subscribe(0.0, KEY, 1))
    assert node.receive(0.0, b"P", SubscribeSucceeded(uid, KEY, None)) == [
        Deliver(1, Subscribed(KEY, root=False))
    ]
    return node


def up(effects: list[Effect]) -> list[int]:
    """The uids of the publishes sent to P."""
    return [m.uid for peer, m in sends(effects) if peer == b"P" and isinstance(m, PublishData)]


def publish(node: Node, uid: int, size: int = 10, client: int = 1, now: float = 0.5) -> list[int]:
    return up(node.publish(now, KEY, client, uid, bytes(size)))


def answer(node: Node, uid: int, number: int, now: float = 0.6) -> list[Effect]:
    return node.receive(now, b"P", PublishSucceeded(uid, KEY, number))


def events(effects: list[Effect], client: int = 1) -> list[object]:
    return [e.event for e in effects if isinstance(e, Deliver) and e.client == client]


def test_publishes_past_the_credit_wait_and_go_up_in_order_as_answers_come() -> None:
    node = member()
    sent = [uid for n in range(5) for uid in publish(node, UID + n)]
    assert sent == [UID, UID + 1]
    assert node.stats.held_up == 3
    effects = answer(node, UID + 1, 1)
    assert events(effects) == [PublishAcked(KEY, UID + 1, 1)]
    assert up(effects) == [UID + 2]
    assert up(answer(node, UID, 0)) == [UID + 3]
    assert up(answer(node, UID + 3, 3)) == [UID + 4]
    assert up(answer(node, UID + 2, 2)) == []


def test_the_credit_counts_payload_bytes_and_one_publish_always_goes() -> None:
    node = member()
    assert publish(node, UID, size=BYTES * 3) == [UID]  # alone: larger than the credit
    assert publish(node, UID + 1, size=10) == []
    assert up(answer(node, UID, 0)) == [UID + 1]
    assert publish(node, UID + 2, size=BYTES - 10) == [UID + 2]
    assert publish(node, UID + 3, size=1) == []


def test_a_held_publish_is_timed_from_when_it_goes_up() -> None:
    node = member()
    for n in range(3):
        publish(node, UID + n)
    effects = answer(node, UID, 0, now=0.5 + TIMEOUT * 0.9)
    assert up(effects) == [UID + 2]
    # The first round of resends: UID + 1 once more, UID + 2 not yet (sent later).
    assert up(node.handle_timer(0.5 + TIMEOUT)) == [UID + 1]
    assert up(node.handle_timer(0.5 + TIMEOUT * 1.9)) == [UID + 2]


def test_when_the_tree_does_not_answer_the_held_publishes_fail_with_the_out_ones() -> None:
    node = member()
    for n in range(4):
        publish(node, UID + n)
    failed: list[object] = []
    for attempt in range(1, ATTEMPTS + 1):
        failed += events(node.handle_timer(0.5 + TIMEOUT * attempt))
    # UID's last try ends first: the held ones fail with it, then UID + 1's ends too.
    assert [(e.uid, e.error) for e in failed if isinstance(e, PublishFailed)] == [
        (UID + n, PublishError.TIMEOUT) for n in (0, 2, 3, 1)
    ]
    assert not node.flow.publishes.local and not node.flow.publishes.credit.credits


def test_a_client_that_goes_forgets_its_held_publishes_and_frees_their_place() -> None:
    node = member()
    publish(node, UID, client=1)
    publish(node, UID + 1, client=1)
    publish(node, UID + 2, client=2)
    publish(node, UID + 3, client=1)
    # Client 1's publishes are forgotten, those out with them: client 2's goes up.
    assert up(node.remove_client(0.55, 1)) == [UID + 2]
    assert set(node.flow.publishes.local) == {UID + 2}
    assert events(answer(node, UID + 2, 1), 2) == [PublishAcked(KEY, UID + 2, 1)]
    assert not node.flow.publishes.credit.credits


def test_a_retry_of_a_held_uid_waits_with_it_and_both_get_the_answer() -> None:
    node = member()
    for n in range(3):
        publish(node, UID + n)
    assert publish(node, UID + 2, client=2) == []
    assert up(answer(node, UID, 0)) == [UID + 2]
    effects = answer(node, UID + 2, 2)
    assert events(effects, 1) == [PublishAcked(KEY, UID + 2, 2)]
    assert events(effects, 2) == [PublishAcked(KEY, UID + 2, 2)]


# --- PublishCredit built alone: a stream's credit of local publishes out, the rest held ----


def credit(kit: Kit) -> tuple[PublishCredit, dict[int, LocalPublish], Calls, Calls, Calls]:
    local: dict[int, LocalPublish] = {}
    arm, route, fail = Calls(), Calls(), Calls()
    part = PublishCredit(kit.config, kit.streams, kit.stats, local, arm, route, fail)
    return part, local, arm, route, fail


def start(part: PublishCredit, local: dict[int, LocalPublish], kit: Kit, uid: int) -> None:
    message = flow_publish(uid)
    local[uid] = LocalPublish(1, message)
    part.send_or_hold(0.0, kit.streams[KEY], 1, message)


def test_past_the_credit_a_publish_is_held_and_goes_once_one_is_answered() -> None:
    kit = Kit(config=NodeConfig(publish_credit_packets=1))
    part, local, arm, route, _ = credit(kit)
    kit.stream(State.JOINED, parent=b"P")
    start(part, local, kit, 1)
    start(part, local, kit, 2)
    assert [call[3].uid for call in route.calls] == [1]
    assert arm.calls == [(0.0, 1, 1)] and kit.stats.held_up == 1
    del local[1]
    part.free_credit(KEY, 1)
    assert KEY in part.released
    part.release_held(3.0)
    assert [call[3].uid for call in route.calls] == [1, 2]
    assert arm.calls[-1] == (3.0, 2, 1)  # its own timeout, counted from its release
    assert not part.released


def test_a_retry_of_a_claimed_publish_goes_up_at_once() -> None:
    kit = Kit(config=NodeConfig(publish_credit_packets=1))
    part, local, _, route, _ = credit(kit)
    stream = kit.stream(State.JOINED, parent=b"P")
    start(part, local, kit, 1)
    stream.claims[2] = 9
    start(part, local, kit, 2)
    assert [call[3].uid for call in route.calls] == [1, 2]


def test_held_publishes_fail_with_their_streams_timeout() -> None:
    kit = Kit(config=NodeConfig(publish_credit_packets=1))
    part, local, _, _, fail = credit(kit)
    kit.stream(State.JOINED, parent=b"P")
    start(part, local, kit, 1)
    start(part, local, kit, 2)
    part.fail_held(KEY, PublishError.TIMEOUT)
    assert fail.calls == [(1, local[2].message, PublishError.TIMEOUT)]


# --- the window follows the tree's pace (``pace``) ------------------------------------------


def test_the_window_of_publishes_out_doubles_a_round_while_the_tree_answers_promptly() -> None:
    node = member(publish_credit_packets=256, publish_credit_bytes=10**9)
    assert node.publish_room(KEY) == INITIAL_WINDOW  # (nothing published yet)
    sent = [uid for n in range(40) for uid in publish(node, UID + n, now=1.0)]
    assert sent == [UID + n for n in range(INITIAL_WINDOW)]  # the rest wait
    assert node.publish_room(KEY) == 0
    # A round: a window's worth of answers, each in 10 ms, well within the allowance.
    for n in range(INITIAL_WINDOW):
        answer(node, UID + n, n, now=1.01)
    assert node.flow.credit.paces[KEY].limit == 2 * INITIAL_WINDOW
    assert node.publish_room(KEY) == 2 * INITIAL_WINDOW - 8  # (the 8 that waited went up)


def test_a_round_of_late_answers_halves_the_window() -> None:
    node = member(publish_credit_packets=256, publish_credit_bytes=10**9)
    for n in range(INITIAL_WINDOW):
        publish(node, UID + n, now=1.0)
    for n in range(INITIAL_WINDOW):
        answer(node, UID + n, n, now=1.01)  # the base: 10 ms; the window doubles
    first = UID + 100
    for n in range(2 * INITIAL_WINDOW):
        publish(node, first + n, now=1.02)
    # Every answer of the next round takes 2 s, far past 10 ms + 100 ms: a queue stands.
    for n in range(2 * INITIAL_WINDOW):
        answer(node, first + n, INITIAL_WINDOW + n, now=3.02)
    assert node.flow.credit.paces[KEY].limit == INITIAL_WINDOW
    assert node.publish_room(KEY) == INITIAL_WINDOW


def test_the_answer_to_a_publish_sent_again_is_not_timed() -> None:
    # Karn's rule: it may answer either try, so its delay says nothing of the tree.
    node = member(publish_credit_packets=256, publish_credit_bytes=10**9)
    publish(node, UID, now=0.5)
    assert up(node.handle_timer(0.5 + TIMEOUT)) == [UID]  # the second try
    answer(node, UID, 0, now=0.5 + TIMEOUT + 0.01)
    assert node.flow.credit.paces[KEY].base is None


def test_a_publish_given_up_is_not_timed() -> None:
    # Its client left a millisecond after it went up: no answer came, so nothing says how
    # fast the tree is (taken as one, it would make every later answer look queued).
    node = member(publish_credit_packets=256, publish_credit_bytes=10**9)
    publish(node, UID, now=1.0)
    node.remove_client(1.001, 1)
    assert KEY not in node.flow.credit.paces or node.flow.credit.paces[KEY].base is None


def test_a_streams_pace_is_described_for_tools() -> None:
    node = member(publish_credit_packets=256, publish_credit_bytes=10**9)
    assert node.publishing(KEY) is None  # (nothing published)
    for n in range(40):
        publish(node, UID + n, now=1.0)
    assert node.publishing(KEY) == {"window": INITIAL_WINDOW, "base": None, "out": 32, "held": 8}
    answer(node, UID, 0, now=1.5)  # (one went up in its place: out 32, held 7)
    assert node.publishing(KEY) == {"window": INITIAL_WINDOW, "base": 0.5, "out": 32, "held": 7}


def test_a_streams_window_is_its_pace_within_what_its_byte_credit_takes() -> None:
    """The window a node tells its publishers (``Node.publish_window``): the pace's, and no
    more publishes than the byte credit sends up at the mean size of those out."""
    node = member(publish_credit_packets=256, publish_credit_bytes=10_000)
    assert node.publish_window(KEY) == INITIAL_WINDOW  # (nothing published yet)
    for n in range(3):
        publish(node, UID + n, size=10, now=1.0)
    assert node.publish_window(KEY) == INITIAL_WINDOW  # (1,000 of 10 bytes would fit)
    node = member(publish_credit_packets=256, publish_credit_bytes=10_000)
    for n in range(3):
        publish(node, UID + n, size=2_000, now=1.0)
    assert node.publish_window(KEY) == 5  # 10,000 bytes of 2,000-byte publishes


def test_a_busy_streams_window_is_its_live_pace_after_others_push_it_from_the_kept_ones() -> None:
    """Paces are kept for the streams published to most recently; one whose credit is live
    keeps its own pace however many streams began after it, and tells that window."""
    node = member(publish_credit_packets=256, publish_credit_bytes=10**9)
    for n in range(INITIAL_WINDOW + 8):
        publish(node, UID + n, now=1.0)
    for n in range(INITIAL_WINDOW):
        answer(node, UID + n, n, now=1.01)  # a prompt round: the window doubles
    live = node.flow.credit.credits[KEY].pace.limit  # (the 8 held went up: still live)
    assert live == 2 * INITIAL_WINDOW
    for n in range(KEPT_PACES + 1):  # (others begin: KEY's pace leaves the kept ones)
        node.flow.credit._credit(bytes([n]) * 32)
    assert KEY not in node.flow.credit.paces
    assert node.publish_window(KEY) == live
    assert node.publishing(KEY) is not None and node.publishing(KEY)["window"] == live
