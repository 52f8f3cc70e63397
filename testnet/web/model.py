"""The web view's picture of a testnet, kept current from its workers' watch lines.

``LiveView`` starts from the manifest (every node's index, id and launch location) and
applies each worker's ``watch`` diff (``testnet.watch``): it maps the ids in them to node
indices, keeps each node's latest record, and turns what changed into events for the
browsers. Events are plain JSON values:

* ``{"type": "node", ...}``: one node's whole record, its peers and parents as indices;
* ``{"type": "highs", "highs": {node: {key: number}}}``: packet numbers that moved;
* ``{"type": "log", "kind": ..., "text": ...}``: what a person wants told, in words: a
  node killed or restarted, a node joining or leaving a stream's tree, a new root, a
  member re-attaching to a new parent, two roots becoming one (a merge);
* ``{"type": "stream", "key": ..., "location": ..., "name": ... or None}``: a stream seen
  for the first time, or named by the page; ``{"type": "stream", "key": ..., "gone": true}``:
  one no node carries any more, forgotten;
* ``{"type": "rates", "rates": {key: packets per second}}``: each stream's publish rate,
  from its highest number over the last ``RATE_WINDOW`` seconds (``rates``).

The browser draws from the same records it is sent, so the server and the page never
disagree on the tree: the page finds roots, depths and lags from parents and highs.
"""

from __future__ import annotations

import collections
from typing import Any

from keyspace.location import key_location
from overlay.runtime.identity import parse_node_id
from testnet.manifest import Manifest
from testnet.watch import short_id

# Seconds over which a stream's publish rate is measured.
RATE_WINDOW = 2.0

# Log events kept for a browser that connects later.
LOG_KEPT = 200

Event = dict[str, Any]


def checked(watch: object) -> dict[str, Any]:
    """``watch`` if it is a well-formed watch diff (``testnet.watch``); ValueError naming
    the first field at fault otherwise. A worker is one of ours, but what comes over a
    socket is checked all the same: a bad line must cost a reconnection, not the view."""

    def need(ok: bool, what: str) -> None:
        if not ok:
            raise ValueError(f"a watch line with {what}")

    need(isinstance(watch, dict), "no object")
    assert isinstance(watch, dict)
    nodes, highs = watch.get("nodes", []), watch.get("highs", {})
    need(isinstance(nodes, list) and isinstance(highs, dict), "bad nodes or highs")
    for raw in nodes:
        need(isinstance(raw, dict) and type(raw.get("node")) is int, "a node without an index")
        if not raw.get("alive"):
            continue
        location, peers, streams = raw.get("location"), raw.get("peers"), raw.get("streams")
        need(type(location) is float and 0.0 <= location < 1.0, "a bad location")
        need(isinstance(peers, list) and all(isinstance(p, str) for p in peers), "bad peers")
        need(isinstance(streams, dict), "bad streams")
        for key, stream in streams.items():
            need(_is_key(key) and isinstance(stream, dict), "a bad stream key")
            parent = stream.get("parent")
            need(parent is None or isinstance(parent, str), "a bad parent")
            need(isinstance(stream.get("state"), str), "a bad stream state")
            need(type(stream.get("children")) is int, "a bad child count")
    for index, changed in highs.items():
        decimal = index.isascii() and index.isdecimal() and len(index) <= 9
        need(decimal and isinstance(changed, dict), "a bad highs entry")
        need(all(_is_key(k) and type(h) is int for k, h in changed.items()), "a bad high")
    return watch


def _is_key(text: object) -> bool:
    return isinstance(text, str) and len(text) == 64 and all(c in HEX for c in text)


HEX = frozenset("0123456789abcdef")


class LiveView:
    """Every node's latest record, and the log of what happened (see the module notes)."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self._index = {short_id(parse_node_id(n.id)): n.index for n in manifest.nodes}
        self.nodes: dict[int, Event] = {
            n.index: {
                "type": "node",
                "node": n.index,
                "alive": True,
                "location": n.location,
                "peers": [],
                "streams": {},
                "worker": n.worker,
            }
            for n in manifest.nodes
        }
        self.highs: dict[int, dict[str, int]] = {}
        self.names: dict[str, str] = {}  # stream key (hex) -> name, for streams the page made
        self.locations: dict[str, float] = {}  # stream key (hex) -> its keyspace location
        self.log: collections.deque[Event] = collections.deque(maxlen=LOG_KEPT)
        self._heads: dict[str, collections.deque[tuple[float, int]]] = {}
        self._unheard: set[int] = set()  # nodes shown dead because their worker is silent

    def add_node(self, short: str, location: float) -> int:
        """Number a node first seen now (a view of one node numbers its peers so); its
        index, or the one it had."""
        index = self._index.get(short)
        if index is None:
            index = self._index[short] = len(self.nodes)
            self.nodes[index] = {
                "type": "node",
                "node": index,
                "alive": True,
                "location": location,
                "peers": [],
                "streams": {},
                "worker": 0,
            }
        return index

    def index_of(self, short: str) -> int | None:
        return self._index.get(short)

    def snapshot(self) -> Event:
        """Everything a browser needs to draw the testnet as it is now."""
        return {
            "type": "snapshot",
            "nodes": list(self.nodes.values()),
            "highs": {str(i): h for i, h in self.highs.items()},
            "streams": [self._stream(key) for key in self.locations],
            "log": list(self.log),
        }

    def apply(self, now: float, watch: object, *, say: bool = True) -> list[Event]:
        """Take one worker's watch diff; the events it makes, in order (with ``say`` False,
        no log lines). ValueError, with nothing changed, for a diff that is not one
        (``checked``)."""
        watch = checked(watch)
        events: list[Event] = []
        # Deaths first: a look that saw a root die and another node take over should say
        # the new root took over, not that it stands beside the dead one.
        for raw in sorted(watch.get("nodes", ()), key=lambda r: bool(r.get("alive"))):
            index = raw.get("node")
            if index not in self.nodes:
                continue  # not a node of this manifest: another testnet's worker
            record = self._record(index, raw)
            for key in record["streams"].keys() - self.locations.keys():
                self.locations[key] = key_location(bytes.fromhex(key))
                events.append(self._stream(key))
            old = self.nodes[index]
            if index in self._unheard:  # (shown dead while its worker was silent)
                self._unheard.discard(index)
                old = {**old, "alive": record["alive"]}
            if say:
                events.extend(self._told(now, old, record))
            self.nodes[index] = record
            events.append(record)
            # A stream the node left takes its number with it: one it joins again starts
            # from what the node holds then, not from before.
            kept = self.highs.get(index)
            if kept is not None:
                for key in kept.keys() - record["streams"].keys():
                    del kept[key]
        moved: dict[str, dict[str, int]] = {}
        for text, changed in watch.get("highs", {}).items():
            index = int(text)
            if index in self.nodes and self.nodes[index]["alive"]:
                self.highs.setdefault(index, {}).update(changed)
                moved[text] = changed
                for key, high in changed.items():
                    self._head(now, key, high)
        if moved:
            events.append({"type": "highs", "highs": moved})
        self.log.extend(e for e in events if e["type"] == "log")
        return events

    def name(self, key: str, name: str) -> list[Event]:
        """The page made stream ``key`` under ``name``: say so from now on."""
        if self.names.get(key) == name:
            return []
        self.names[key] = name
        self.locations[key] = key_location(bytes.fromhex(key))
        return [self._stream(key)]

    def _stream(self, key: str) -> Event:
        return {
            "type": "stream",
            "key": key,
            "location": self.locations[key],
            "name": self.names.get(key),
        }

    def mark_dead(self, now: float, indices: range) -> list[Event]:
        """A worker stopped answering: its nodes are shown dead until it speaks again. The
        caller says so in one line: the nodes may well be alive. Each keeps its record
        meanwhile, so that when the worker answers again only what changed is told, not
        every node coming back and joining its streams."""
        events: list[Event] = []
        for index in indices:
            record = self.nodes.get(index)
            if record is not None and record["alive"]:
                self._unheard.add(index)
                self.nodes[index] = {**record, "alive": False}
                events.append(self.nodes[index])
        return events

    def rates(self, now: float) -> list[Event]:
        """Each stream's packets per second over the last ``RATE_WINDOW`` seconds, and the
        streams forgotten now: no node carries them, the page did not name them, and none
        moved within the window (so the streams kept are bounded by what nodes carry)."""
        carried = self.stream_keys()
        gone: list[Event] = []
        for key in list(self.locations):
            heads = self._heads.get(key)
            recent = heads is not None and heads[-1][0] > now - RATE_WINDOW
            if key not in carried and key not in self.names and not recent:
                del self.locations[key]
                self._heads.pop(key, None)
                gone.append({"type": "stream", "key": key, "gone": True})
        rates: dict[str, float] = {}
        for key, heads in self._heads.items():
            while len(heads) > 1 and heads[1][0] <= now - RATE_WINDOW:
                heads.popleft()
            (start, first), (end, last) = heads[0], heads[-1]
            # Between the heads seen, not up to now: a worker reports a quarter second late
            # at most, which would read a steady rate low. A head older than the window
            # means the stream stopped.
            stopped = end <= now - RATE_WINDOW or end == start
            rates[key] = 0.0 if stopped else round((last - first) / (end - start), 1)
        return [{"type": "rates", "rates": rates}, *gone] if rates or gone else []

    def stream_keys(self) -> set[str]:
        return {key for record in self.nodes.values() for key in record["streams"]}

    def _head(self, now: float, key: str, high: int) -> None:
        heads = self._heads.setdefault(key, collections.deque())
        if not heads or high > heads[-1][1]:
            heads.append((now, high))

    def _record(self, index: int, raw: dict[str, Any]) -> Event:
        old = self.nodes[index]
        if not raw.get("alive"):
            return {**old, "alive": False, "peers": [], "streams": {}}
        lookup = self._index.get
        streams = {}
        for key, s in raw.get("streams", {}).items():
            parent = s.get("parent")
            streams[key] = {
                "state": s.get("state"),
                "parent": None if parent is None else lookup(parent),
                "children": s.get("children", 0),
            }
        return {
            "type": "node",
            "node": index,
            "alive": True,
            "location": raw.get("location", old["location"]),
            "peers": sorted(p for p in map(lookup, raw.get("peers", ())) if p is not None),
            "streams": streams,
            "worker": old["worker"],
        }

    def _told(self, now: float, old: Event, new: Event) -> list[Event]:
        """What changed between two records of one node, in words."""
        index = new["node"]
        out: list[Event] = []

        def say(kind: str, text: str, stream: str | None = None) -> None:
            out.append(
                {
                    "type": "log",
                    "t": now,
                    "kind": kind,
                    "node": index,
                    "stream": stream,
                    "text": text,
                }
            )

        if old["alive"] and not new["alive"]:
            say("kill", f"node {index} died")
        elif not old["alive"] and new["alive"]:
            say("restart", f"node {index} is back")
        before, after = old["streams"], new["streams"]
        for key, s in after.items():
            name = self._name(key)
            was = before.get(key)
            if s["state"] == "root" and (was is None or was["state"] != "root"):
                roots = self._roots(key, exclude=index)
                if roots:
                    say(
                        "root",
                        f"node {index} became a root of {name} beside node"
                        f" {', '.join(map(str, roots))}",
                        key,
                    )
                else:
                    say("root", f"node {index} became the root of {name}", key)
            elif was is None:
                say("join", f"node {index} joined {name}", key)
            elif was["parent"] != s["parent"] and s["parent"] is not None:
                if was["state"] == "root":
                    say(
                        "merge",
                        f"root {index} of {name} joined the tree under node {s['parent']}",
                        key,
                    )
                else:
                    say("repair", f"node {index} re-attached to node {s['parent']} in {name}", key)
        if new["alive"]:
            for key in before.keys() - after.keys():
                say("leave", f"node {index} left {self._name(key)}", key)
        return out

    def _roots(self, key: str, exclude: int) -> list[int]:
        return [
            i
            for i, record in self.nodes.items()
            if i != exclude
            and record["alive"]
            and record["streams"].get(key, {}).get("state") == "root"
        ]

    def _name(self, key: str) -> str:
        name = self.names.get(key)
        return f"'{name}'" if name else f"stream {key[:8]}"
