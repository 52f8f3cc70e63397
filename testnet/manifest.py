"""The testnet manifest: what ``overlay testnet up`` started, where, for the other commands.

``up`` writes ``manifest.json`` in the testnet's folder once every node is linked; ``status``,
``kill``, ``restart``, ``down``, ``chaos``, ``overlay tree`` and ``overlay stats`` read it.
It lists every node (index, node id, location, peer and client address, the worker that
hosts it, its topology neighbours) and every worker process (pid, control address, log
file). Addresses are ``host:port``; node ids are their printable form.

The manifest is the one file a user needs to reach a testnet, so it holds no secrets (the
nodes' private keys stay in the workers' plan files) and it is written atomically (a
temporary file renamed into place): a reader sees the old manifest or the new, never half.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
DEFAULT_DIR = Path("testnet-data")


class ManifestError(ValueError):
    """No testnet where the user pointed, or a manifest that cannot be read."""


@dataclass(frozen=True, slots=True)
class NodeEntry:
    index: int
    id: str  # printable node id
    location: float
    peer: str  # host:port peers dial
    client: str  # host:port of the client port
    worker: int  # index into Manifest.workers
    neighbours: tuple[int, ...]  # topology neighbours (indices)


@dataclass(frozen=True, slots=True)
class WorkerEntry:
    index: int
    pid: int
    control: str  # host:port of the worker's control port
    log: str  # path of its log file
    nodes: tuple[int, int]  # the node indices it hosts: range(nodes[0], nodes[1])


@dataclass(frozen=True, slots=True)
class Manifest:
    seed: int
    degree: int
    network: str
    nodes: tuple[NodeEntry, ...]
    workers: tuple[WorkerEntry, ...]
    started_at: float  # Unix time the testnet came up
    up_seconds: float  # how long ``up`` took until every node was linked

    def node(self, index: int) -> NodeEntry:
        """Node ``index``; ManifestError naming the valid range if there is none."""
        if not 0 <= index < len(self.nodes):
            raise ManifestError(
                f"node {index} is out of range: this testnet has nodes 0..{len(self.nodes) - 1}"
            )
        return self.nodes[index]

    def worker_of(self, index: int) -> WorkerEntry:
        return self.workers[self.node(index).worker]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        nodes = tuple(
            NodeEntry(**{**n, "neighbours": tuple(n["neighbours"])}) for n in data["nodes"]
        )
        workers = tuple(WorkerEntry(**{**w, "nodes": tuple(w["nodes"])}) for w in data["workers"])
        return cls(**{**data, "nodes": nodes, "workers": workers})


def manifest_path(directory: Path) -> Path:
    return directory / MANIFEST_NAME


def write_manifest(directory: Path, manifest: Manifest) -> Path:
    """Write ``manifest.json`` in ``directory`` atomically; returns its path."""
    path = manifest_path(directory)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(manifest.to_json(), indent=1))
    os.replace(temporary, path)
    return path


def read_manifest(where: Path) -> Manifest:
    """The manifest in folder ``where`` (or the file ``where``). ManifestError if there is
    none, saying how to start a testnet, or if it cannot be read."""
    path = where if where.suffix == ".json" else manifest_path(where)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(
            f"no testnet running in {where} (no {path.name} there): "
            "start one with `overlay testnet up`, or pass --dir/--manifest"
        ) from None
    except (OSError, ValueError) as error:
        raise ManifestError(f"cannot read {path}: {error}") from None
    try:
        return Manifest.from_json(data)
    except (KeyError, TypeError) as error:
        raise ManifestError(f"{path} is not a testnet manifest: {error!r}") from None
