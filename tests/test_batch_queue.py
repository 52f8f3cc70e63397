"""``BatchQueue`` built alone: each stream's waiting publishes run in the order queued, a
head that must wait holds the rest of its stream (and only its stream), and the bound
counts publishes, not entries."""

from __future__ import annotations

from overlay.core.batch_queue import Attempt, BatchQueue


class Attempts:
    def __init__(self) -> None:
        self.ran: list[str] = []
        self.blocked: set[str] = set()

    def __call__(self, name: str) -> Attempt:
        def attempt(now: float) -> bool:
            if name in self.blocked:
                return False
            self.ran.append(name)
            return True

        return attempt


def test_a_streams_publishes_run_in_order_and_a_waiting_head_holds_only_its_stream() -> None:
    queue, attempts = BatchQueue(limit=10), Attempts()
    attempts.blocked.add("a1")
    queue.add(b"A", attempts("a1"), 4)
    queue.add(b"A", attempts("a2"), 1)
    queue.add(b"B", attempts("b1"), 2)
    queue.run(1.0)
    assert attempts.ran == ["b1"] and queue.waits(b"A") and not queue.waits(b"B")
    assert queue.count == 5 and queue.room(5) and not queue.room(6)
    attempts.blocked.clear()
    queue.run(2.0)
    assert attempts.ran == ["b1", "a1", "a2"] and not queue and queue.count == 0
