"""A stream kept by its root after everyone left (``overlay.core.keeping``): a line of A (0.1),
B (0.3) and C (0.48), where A's packets 0..2 were numbered by the root C before all went."""

from __future__ import annotations

from corenet import CoreNet
from nodes import KEY

from overlay.core.config import NodeConfig

KEEP = 100.0


def net_with_history(keep_idle: float = KEEP) -> CoreNet:
    """A (0.1) - B (0.3) - C (0.48): a publisher at A has had packets 0..2 numbered by the
    root C, and has gone; so has everyone else."""
    net = CoreNet(seed=1, config=NodeConfig(keep_idle=keep_idle))
    for name, location in ((b"A", 0.1), (b"B", 0.3), (b"C", 0.48)):
        net.add(name, location)
    net.connect(b"A", b"B")
    net.connect(b"B", b"C")
    for n in range(3):
        net.publish(b"A", KEY, b"p%d" % n, uid=10 + n)
    assert [a.number for a in net.answers(b"A")] == [0, 1, 2]  # type: ignore[attr-defined]
    net.remove_client(b"A", 1)
    return net
