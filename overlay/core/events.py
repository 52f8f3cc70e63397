"""Events the core delivers to its local clients (the scripts and tools on this node)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Subscribed:
    """The node is in the stream's tree; ``root`` if it is the tree's root."""

    key: bytes
    root: bool


@dataclass(frozen=True, slots=True)
class SubscribeFailed:
    """The node could not join the stream's tree; ``reason`` says why, for a person."""

    key: bytes
    reason: str


ClientEvent = Subscribed | SubscribeFailed
