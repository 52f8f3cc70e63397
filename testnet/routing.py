"""How well a running testnet's locations route: ``overlay testnet routing``.

Each look asks every node (``describe``) where it is and whom it is linked to, builds the
graph as it stands (``keyspace.topology.Topology``, over the nodes that answered) and
measures on it:

* plain greedy routing (``keyspace.darknet.greedy_success``, Sandberg's measure): the share
  of walks from random nodes toward random targets that reach the closest node, and their
  mean steps;
* the links' geometric mean length (``keyspace.darknet.link_length_gmean``): what location
  swapping shortens;
* the swaps so far, from every node's stats (``swaps`` counts each swap at both ends).

On a darknet testnet (``overlay testnet up --darknet``) the first rises and the second
falls as the nodes swap (``overlay.core.swaps``); on an opennet they stand still. The same
``--seed`` draws the same walks each look, so two looks differ only by the locations. A
first line measures the graph as launched (the manifest's links and locations), before any
swap.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import trio

from keyspace.darknet import greedy_success, link_length_gmean
from keyspace.topology import Topology
from overlay.runtime.identity import node_id_text
from testnet.manifest import Manifest
from testnet.survey import Answer, survey


@dataclass(frozen=True, slots=True)
class Look:
    """One look at a testnet's routing (see the notes)."""

    elapsed: float  # seconds since the first look
    nodes: int  # nodes that answered, of those in the manifest
    swaps: int
    swap_attempts: int
    greedy_pct: float
    greedy_steps: float
    link_gmean: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self, when: str | None = None) -> str:
        return (
            f"{when or f'{self.elapsed:6.1f} s'}  {self.nodes} nodes  swaps {self.swaps:,} "
            f"(of {self.swap_attempts:,} started)  greedy routing reaches the closest node "
            f"{self.greedy_pct:.1f}% in {self.greedy_steps:.2f} steps  link length "
            f"(geometric mean) {self.link_gmean:.4f}"
        )


def graph(manifest: Manifest, answers: Sequence[Answer]) -> Topology:
    """The links and locations of the nodes that answered, as they reported them. A link
    counts only if both its ends reported it (the answers come moments apart, so a link
    that came or went between them is left out), and so does a link to a node that did
    not answer."""
    alive = [a for a in answers if a.description is not None and a.index is not None]
    position = {manifest.nodes[a.index].id: k for k, a in enumerate(alive)}  # type: ignore[index]
    locations: list[float] = []
    neighbours: list[set[int]] = []
    for a in alive:
        description = a.description
        assert description is not None
        locations.append(float(description["location"]))
        linked = {position.get(_text(p["id"])) for p in description["peers"]}
        neighbours.append({k for k in linked if k is not None})
    mutual = tuple(
        tuple(sorted(j for j in linked if k in neighbours[j]))
        for k, linked in enumerate(neighbours)
    )
    return Topology(tuple(locations), mutual)


def _text(node_id: Any) -> str:
    return node_id_text(node_id) if isinstance(node_id, bytes) else str(node_id)


def look(
    manifest: Manifest, answers: Sequence[Answer], samples: int, seed: int, elapsed: float
) -> Look:
    topology = graph(manifest, answers)
    pct, steps = greedy_success(topology, samples, random.Random(seed))
    stats = [a.description["stats"] for a in answers if a.description is not None]
    return Look(
        elapsed=elapsed,
        nodes=len(topology),
        swaps=sum(s.get("swaps", 0) for s in stats) // 2,
        swap_attempts=sum(s.get("swap_attempts", 0) for s in stats),
        greedy_pct=pct,
        greedy_steps=steps,
        link_gmean=link_length_gmean(topology),
    )


def launched(manifest: Manifest) -> Topology:
    """The graph the testnet was launched with: the manifest's links and locations."""
    return Topology(
        tuple(n.location for n in manifest.nodes), tuple(n.neighbours for n in manifest.nodes)
    )


def as_launched(manifest: Manifest, samples: int, seed: int) -> Look:
    """The same measures on the graph the testnet was launched with, before any swap."""
    topology = launched(manifest)
    pct, steps = greedy_success(topology, samples, random.Random(seed))
    return Look(0.0, len(topology), 0, 0, pct, steps, link_length_gmean(topology))


async def watch(
    manifest: Manifest,
    *,
    samples: int,
    seed: int,
    every: float,
    count: int,
    emit: Callable[[Look], None],
) -> tuple[list[Look], Topology]:
    """``count`` looks, ``every`` seconds apart, each handed to ``emit`` as it is made;
    and the graph as the last look found it."""
    looks: list[Look] = []
    started = trio.current_time()
    addresses = [n.client for n in manifest.nodes]
    for k in range(count):
        if k:
            await trio.sleep_until(started + k * every)
        answers = await survey(addresses, indices=range(len(addresses)))
        looks.append(look(manifest, answers, samples, seed, trio.current_time() - started))
        emit(looks[-1])
    return looks, graph(manifest, answers)
