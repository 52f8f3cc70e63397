"""``overlay stats`` counts the peers and clients each node refused, by reason."""

from __future__ import annotations

import random

from overlay.runtime.host import NodeHost
from overlay.runtime.refusals import Refusal
from testnet.survey import Answer
from tools.stats_cmd import stats_table


def test_refusals_are_a_column_and_summed_by_reason() -> None:
    answers = []
    for n in range(2):
        host = NodeHost(bytes([n]) * 32, 0.5, rng=random.Random(n), clock=lambda: 0.0)
        host.refusals(Refusal.HANDSHAKE, "10.0.0.9:1", "handshake timed out")
        if n:
            host.refusals(Refusal.LINKS_FULL, "peer", "the node has 256 links")
        answers.append(Answer(f"127.0.0.1:{n}", host.describe()))
    table = stats_table(answers).splitlines()
    head = table[0].split()
    assert "refused" in head
    column = head.index("refused")
    assert [line.split()[column] for line in table[1:3]] == ["1", "2"]
    assert table[-1] == "refused by reason: handshake 2, links_full 1"
