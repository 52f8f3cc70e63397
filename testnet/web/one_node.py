"""The web view of one node that is not part of a local testnet: ``overlay web --node ADDR``.

A node anywhere (one started by ``overlay node``) has no worker to push its changes, so the
view asks the node itself, through its client port: one ``describe`` a second over one
connection, which is what ``overlay stats`` asks. What a node knows is its own part of the
picture: where it and its peers sit on the ring, and for each stream it carries its state,
its parent and its children. So the page shows the node (index 0), its peers (numbered as
first seen), and each stream's tree as far as the node sees it: its parent above it and its
children below. It is read-only: the view refuses every action, since it did not start
the node and may not stop it.

The description comes from whatever answers at the address the user gave, so it is checked
as peer input is: a malformed one costs a warning and a retry, never the view.
"""

from __future__ import annotations

from typing import Any

import trio

from overlay.client.aio import open_client
from overlay.client.connection import ClientError
from overlay.client.protocol import ClientProtocolError
from overlay.runtime.identity import node_id_text
from testnet.manifest import Manifest, NodeEntry
from testnet.watch import short_id
from testnet.web.following import Feed
from testnet.web.model import LiveView

# How often the node is asked: the page then trails it by a second at most.
ASK_EVERY = 1.0

# A node on loopback answers describe in milliseconds; one silent this long is wedged.
ANSWER_WITHIN = 5.0

# Peers or streams a description may list: a node has tens of peers, and streams up to its
# max_streams; a description listing more is not one.
MAX_PEERS = 4096

# Nodes a view of one node numbers at most, over its whole run.
MAX_KNOWN = 4096

ID_SIZE = 32


def manifest_of(address: str, description: dict[str, Any]) -> Manifest:
    """A one-node manifest for ``LiveView``: the node at ``address``, as it describes itself
    (ValueError if the description is not a node's)."""
    node_id, location = _id(description.get("id")), _location(description.get("location"))
    entry = NodeEntry(0, node_id_text(node_id), location, "", address, 0, ())
    return Manifest(0, 0, "", (entry,), (), 0.0, 0.0)


class NodeFollower:
    """Turns one node's successive descriptions into watch diffs for ``view``, numbering its
    peers as they first appear."""

    def __init__(self, view: LiveView) -> None:
        self._view = view
        self._linked: set[str] = set()  # the peers of the last description
        self._sent: dict[str, dict[str, Any]] = {}  # the last record sent for each peer
        self.full = False  # a peer went unnumbered: the view holds ``MAX_KNOWN`` nodes

    def diff(self, description: dict[str, Any]) -> dict[str, Any]:
        """The watch diff (``testnet.watch``) that brings the view to ``description``;
        ValueError, with the view unchanged, if it is not a node's description."""
        own = short_id(_id(description.get("id")))
        location = _location(description.get("location"))
        peers = description.get("peers")
        streams = description.get("streams")
        if not isinstance(peers, list) or len(peers) > MAX_PEERS:
            raise ValueError("a description without a list of peers")
        if not isinstance(streams, list) or len(streams) > MAX_PEERS:
            raise ValueError("a description without a list of streams")
        seen: dict[str, float] = {}
        for peer in peers:
            if not isinstance(peer, dict):
                raise ValueError("a peer that is not a map")
            seen[short_id(_id(peer.get("id")))] = _location(peer.get("location"))
        seen.pop(own, None)  # (the node is index 0, not a peer of its own)
        # Numbered once, peers stay on the ring, but only so many: a node whose peers churn
        # (or one that makes ids up) must not grow the view without end.
        room = MAX_KNOWN - len(self._view.nodes)
        new = [s for s in seen if self._view.index_of(s) is None]
        for short in new[max(room, 0) :]:
            del seen[short]
            self.full = True
        records: dict[str, dict[str, Any]] = {
            short: {"alive": True, "location": where, "peers": [own], "streams": {}}
            for short, where in seen.items()
        }
        mine: dict[str, Any] = {}
        highs: dict[str, int] = {}
        for stream in streams:
            key, state, parent, children, high = _stream(stream)
            mine[key] = {
                "state": state,
                "parent": None if parent is None else short_id(parent),
                "children": len(children),
            }
            if high is not None:
                highs[key] = high
            if parent is not None and short_id(parent) in records:
                records[short_id(parent)]["streams"][key] = {
                    "state": "parent",
                    "parent": None,
                    "children": 1,
                }
            for child in children:
                if short_id(child) in records:
                    records[short_id(child)]["streams"][key] = {
                        "state": "joined",
                        "parent": own,
                        "children": 0,
                    }
        view = self._view
        for short, where in seen.items():
            view.add_node(short, where)
        # A peer no longer linked keeps its place but no part in the node's trees.
        for short in self._linked - seen.keys():
            index = view.index_of(short)
            if index is not None:
                where = view.nodes[index]["location"]
                records[short] = {"alive": True, "location": where, "peers": [], "streams": {}}
        self._linked = set(seen)
        records[own] = {"alive": True, "location": location, "peers": sorted(seen), "streams": mine}
        # Only what changed: a page redraws the ring for every record it gets.
        records = {k: r for k, r in records.items() if self._sent.get(k) != r}
        self._sent.update(records)
        nodes = [{"node": view.index_of(s), **r} for s, r in records.items()]
        return {"nodes": nodes, "highs": {"0": highs} if highs else {}}


async def follow_node(feed: Feed, address: str) -> None:
    """Keep ``feed.view`` current from the node at ``address`` until cancelled."""
    view = feed.view
    follower = NodeFollower(view)
    answering = True
    told_full = False
    while True:
        try:
            async with open_client(address, name="overlay web") as client:
                while True:
                    with trio.fail_after(ANSWER_WITHIN):
                        description = await client.describe()
                    feed.broadcast(view.apply(trio.current_time(), follower.diff(description)))
                    if follower.full and not told_full:
                        told_full = True
                        feed.say(
                            "node",
                            f"the view holds {MAX_KNOWN} nodes: new peers of the"
                            f" node at {address} are no longer shown",
                            None,
                        )
                    if not answering:
                        feed.say("node", f"the node at {address} answers again", None)
                        answering = True
                    await trio.sleep(ASK_EVERY)
        except (ClientError, ClientProtocolError, OSError, trio.TooSlowError) as error:
            if answering:
                reason = str(error) or f"no answer within {ANSWER_WITHIN} s"
                feed.say("node", f"the node at {address} does not answer: {reason}", None)
                down = {"nodes": [{"node": 0, "alive": False}]}
                feed.broadcast(view.apply(trio.current_time(), down, say=False))
                answering = False
        except (ValueError, RecursionError) as error:
            feed.warn(f"the node at {address} sent a description the view cannot read: {error}")
        await trio.sleep(ASK_EVERY)


def _id(value: object) -> bytes:
    if not isinstance(value, bytes) or len(value) != ID_SIZE:
        raise ValueError("a node id that is not 32 bytes")
    return value


def _location(value: object) -> float:
    if not isinstance(value, float) or not 0.0 <= value < 1.0:
        raise ValueError(f"a location outside [0, 1): {value!r}")
    return value


def _stream(value: object) -> tuple[str, str, bytes | None, list[bytes], int | None]:
    if not isinstance(value, dict):
        raise ValueError("a stream that is not a map")
    key, state, parent = value.get("key"), value.get("state"), value.get("parent")
    children, high = value.get("children"), value.get("high")
    if not isinstance(key, bytes) or len(key) != ID_SIZE or not isinstance(state, str):
        raise ValueError("a stream without a 32-byte key and a state")
    if not isinstance(children, list) or len(children) > MAX_PEERS:
        raise ValueError("a stream without a list of children")
    if high is not None and type(high) is not int:
        raise ValueError("a stream whose highest number is not a number")
    return (
        key.hex(),
        state,
        None if parent is None else _id(parent),
        [_id(c) for c in children],
        high,
    )
