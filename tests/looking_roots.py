"""Roots of KEY (key at 0.5) built alone for the tests of probes and of the looks that
cross them: a settled root, and a new root whose first look is out."""

from __future__ import annotations

from nodes import KEY, make, meet, sends

from overlay.core.node import Node
from overlay.core.streams import State
from overlay.messages import DataNotFound, Message, ResubscribeRequest

UID = 77


def root(location: float = 0.45, **config: object) -> Node:
    node = make(location, **config)
    node.subscribe(0.0, KEY, 1)
    assert node.streams[KEY].state is State.ROOT
    return node


def new_root_looking(**config: object) -> tuple[Node, ResubscribeRequest]:
    """N (0.45) became root of KEY with peers P (0.2) and Q (0.3) that found nothing; its
    first look (``merges``) is out at Q. Returns N and that look."""
    node = make(0.45, **config)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.3)
    [(_, search)] = sends(node.subscribe(0.0, KEY, 1))
    [(_, search)] = sends(node.receive(0.1, b"Q", DataNotFound(search.uid, KEY, 5)))
    [(peer, look)] = sends(node.receive(0.2, b"P", not_found(search)))
    assert node.streams[KEY].state is State.ROOT and node.streams[KEY].root.looking == look.uid
    assert peer == b"Q" and isinstance(look, ResubscribeRequest)
    return node, look


def not_found(request: Message) -> DataNotFound:
    return DataNotFound(request.uid, KEY, 0)  # type: ignore[attr-defined]
