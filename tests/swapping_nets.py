"""Small networks of cores that swap locations, for the swapping tests."""

from __future__ import annotations

from corenet import CoreNet

from overlay.core.config import NodeConfig

# Swaps start only when a test asks (the timer's first round is days away).
SWAPPING = NodeConfig(swap_interval=1e6, swap_htl=2, swap_timeout=10.0)


def chain(config: NodeConfig = SWAPPING) -> CoreNet:
    """A (0.2) - R (0.5) - B (0.8): a walk of two hops from A ends at B."""
    net = CoreNet(config=config)
    for name, location in ((b"A", 0.2), (b"R", 0.5), (b"B", 0.8)):
        net.add(name, location)
    net.connect(b"A", b"R")
    net.connect(b"R", b"B")
    return net
