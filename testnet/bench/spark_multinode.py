"""Spark publishing through a testnet of node processes, with task failures injected.

    python -m testnet.bench.spark_publish --multi-node [--nodes 5] [--fail-partitions 2]
                                          [--rows 1000000] [--partitions 2] [--repeats 2]
                                          [--max-in-flight N] [--json]

Method. ``testnet.launcher.up`` starts ``--nodes`` real nodes, one process each, linked in a
ring (degree 2: ``small_world`` adds no long links below degree 4), so packets cross several
TCP links. The stream's root is the node closest to the stream's location
(``choose_roles``); the two nodes next to it on the ring publish (the sink's ``node`` option
names both: partition p goes through the p mod 2-th) and every other node has a subscriber,
so subscribers hang at least two hops below the root and the publishing nodes relay their
packets. Once the subscribers have joined, every node is asked ``describe``: the bench
refuses to run unless the node that calls itself root is the one chosen, and it is no
publishing node.

Spark runs on ``local[2,3]`` (two cores; a task may fail twice before its job does). With
``--fail-partitions N`` the DataFrame goes through an Arrow UDF that, in the first
attempt of partitions ``0 .. N-1``, raises once half the partition's rows have passed, so
the sink has published part of the partition when Spark retries the task. Each failure
leaves a marker file, and the report counts them: a failure the bench meant to inject and
did not is visible. ``--fail-partitions 0`` writes the plain DataFrame.

Each round writes the same DataFrame (failures included) to the overlay and to the plain
TCP sink of ``spark_publish``, alternating which goes first. After an overlay write the
bench reads the root's newest packet number and waits until every subscriber has it (or
nothing came for ``QUIET`` seconds), then checks every row arrived exactly once at every
subscriber (``row_check``). Rates are rows a second of the whole ``save()``, retries
included; the ratio of the two medians, and the load average before and after, are the
numbers to read on a shared machine.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from keyspace.location import distance
from keyspace.stream_key import StreamKey
from overlay.runtime.identity import node_id_text
from testnet import launcher
from testnet.bench.processes import BenchError
from testnet.bench.row_check import RowCheck
from testnet.bench.spark_publish import (
    STREAM,
    Counter,
    Discard,
    bench_frame,
    load_text,
    overlay_write,
    plain_write,
    spark_session,
)
from testnet.manifest import Manifest

MIN_NODES = 5  # the root, two publishing nodes beside it, two subscribing nodes beyond
DEGREE = 2  # a ring: every publish and delivery crosses the links next to the root
MASTER = "local[2,3]"  # two cores; maxFailures 3, so an injected failure is retried
# After an overlay write returns, the root has ordered every packet and delivery takes
# milliseconds a hop; ten seconds without a packet means the rest is not coming.
QUIET = 10.0
# Arrow batches of at most this many rows (Spark's default), and at least ten a partition,
# so that an injected failure lands partway through a partition at any size.
MAX_BATCH_ROWS = 10_000
SEED = 1

Progress = Callable[[str], None]


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


@dataclass(frozen=True, slots=True)
class Roles:
    """Which testnet node does what (manifest indices)."""

    root: int
    publishers: tuple[int, ...]
    subscribers: tuple[int, ...]


def choose_roles(manifest: Manifest, stream: str) -> Roles:
    """The root is the node closest to the stream's location (ties: the lower index, as
    ``keyspace.topology.closest_node``), the publishers its ring neighbours, and every other
    node subscribes."""
    target = StreamKey.parse(stream).location
    nodes = manifest.nodes
    root = min(range(len(nodes)), key=lambda i: (distance(nodes[i].location, target), i))
    publishers = tuple(sorted(nodes[root].neighbours))
    subscribers = tuple(i for i in range(len(nodes)) if i != root and i not in publishers)
    return Roles(root, publishers, subscribers)


def describe_tree(manifest: Manifest, stream: str) -> dict[int, dict[str, Any]]:
    """Every node's own view of ``stream`` (state, parent, children, local subscribers),
    by manifest index; nodes not in the tree are left out."""
    from overlay.client import Client

    index = {entry.id: entry.index for entry in manifest.nodes}

    def name(node_id: object) -> int | str | None:
        if not isinstance(node_id, bytes):
            return None
        text = node_id_text(node_id)
        return index.get(text, text[:8])

    tree = {}
    for entry in manifest.nodes:
        with Client(entry.client, timeout=10) as client:
            views = client.describe(stream)["streams"]
        assert isinstance(views, list)
        for view in views:
            tree[entry.index] = {
                "state": view["state"],
                "parent": name(view["parent"]),
                "children": [name(c) for c in view["children"]],
                "clients": view["clients"],
                "high": view["high"],
            }
    return tree


def check_roles(roles: Roles, tree: dict[int, dict[str, Any]]) -> None:
    """BenchError unless the chosen root, and only it, says it is the root."""
    roots = sorted(i for i, view in tree.items() if view["state"] == "root")
    if roots != [roles.root] or roles.root in roles.publishers:
        raise BenchError(
            f"the stream's root is node(s) {roots}, expected node {roles.root} (publishers "
            f"{list(roles.publishers)}); tree: {tree}"
        )


def failing(frame: Any, partitions: int, fail_after: int, markers: Path, tag: str) -> Any:
    """``frame`` through an Arrow UDF (``arrow_udf``, iterator form: it sees the partition's
    batches in order, and needs no pandas) that fails the first attempt of partitions
    ``0 .. partitions - 1`` once ``fail_after`` of their rows have passed, leaving the marker
    file ``markers/tag-<partition>``."""
    import pyarrow as pa
    from pyspark import TaskContext
    from pyspark.sql.functions import arrow_udf  # type: ignore[attr-defined]

    folder = str(markers)

    def fail_once(values: Iterator[pa.Array]) -> Iterator[pa.Array]:
        context = TaskContext.get()
        assert context is not None
        partition = context.partitionId()
        doomed = context.attemptNumber() == 0 and partition < partitions
        passed = 0
        for batch in values:
            yield batch
            passed += len(batch)
            if doomed and passed >= fail_after:
                Path(folder, f"{tag}-{partition}").touch()
                raise RuntimeError(f"injected failure: partition {partition}, attempt 0")

    # Spark infers the UDF's kind (iterator of arrays) from its type hints, which this
    # module's postponed annotations leave as strings naming a local import: given as types.
    fail_once.__annotations__ = {"values": Iterator[pa.Array], "return": Iterator[pa.Array]}
    return frame.select(arrow_udf(fail_once, "string")("value").alias("value"))


def run(
    *,
    rows: int,
    row_bytes: int,
    partitions: int,
    repeats: int,
    nodes: int = MIN_NODES,
    fail_partitions: int = 2,
    max_in_flight: int | None = None,
    seed: int = SEED,
    progress: Progress = _to_stderr,
) -> dict[str, Any]:
    """Start the testnet, run ``repeats`` rounds of both sinks, stop it; the report."""
    load_before = os.getloadavg()
    directory = Path(tempfile.mkdtemp(prefix="spark-multinode-"))
    try:
        manifest = launcher.up(
            nodes,
            directory,
            processes=nodes,
            seed=seed,
            degree=DEGREE,
            keep_state=False,
            progress=progress,
        )
        try:
            result = _measure(
                manifest,
                directory,
                rows=rows,
                row_bytes=row_bytes,
                partitions=partitions,
                repeats=repeats,
                fail_partitions=fail_partitions,
                max_in_flight=max_in_flight,
            )
        finally:
            launcher.down(directory, progress=lambda _: None)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    result["load_average"] = {"before": load_before, "after": os.getloadavg()}
    return result


def _measure(
    manifest: Manifest,
    directory: Path,
    *,
    rows: int,
    row_bytes: int,
    partitions: int,
    repeats: int,
    fail_partitions: int,
    max_in_flight: int | None,
) -> dict[str, Any]:
    from overlay.client import Client

    roles = choose_roles(manifest, STREAM)
    publishers = ",".join(manifest.nodes[i].client for i in roles.publishers)
    counters = {i: Counter(manifest.nodes[i].client) for i in roles.subscribers}
    for counter in counters.values():
        counter.start()
    tree_before = describe_tree(manifest, STREAM)
    check_roles(roles, tree_before)
    root = Client(manifest.nodes[roles.root].client, timeout=30)
    discard = Discard()
    markers = directory / "failures"
    markers.mkdir()
    spark = spark_session(MASTER)
    per_partition = rows // partitions
    spark.conf.set(
        "spark.sql.execution.arrow.maxRecordsPerBatch",
        str(max(1, min(MAX_BATCH_ROWS, per_partition // 10))),
    )
    try:
        df = bench_frame(spark, rows, row_bytes, partitions)

        def write(sink: str, tag: str) -> str | None:
            frame = df
            if fail_partitions:
                frame = failing(df, fail_partitions, max(1, per_partition // 2), markers, tag)
            try:
                if sink == "overlay":
                    overlay_write(frame, publishers, max_in_flight)
                else:
                    plain_write(frame, discard)
            except Exception as error:  # a job Spark gave up on: reported, not raised
                return str(error).strip().splitlines()[0]
            return None

        def head() -> int:
            views = root.describe(STREAM)["streams"]
            assert isinstance(views, list) and len(views) == 1, views
            return int(views[0]["high"])

        # Warm-up, without failures: Python workers started, the publishing path set up.
        small = df.limit(1000)
        plain_write(small, discard)
        overlay_write(small, publishers, max_in_flight)
        for counter in counters.values():
            counter.wait_for_number(head(), QUIET)
            counter.reset()

        rounds = []
        for round_ in range(repeats):
            order = ("plain", "overlay") if round_ % 2 == 0 else ("overlay", "plain")
            entry: dict[str, Any] = {}
            for sink in order:
                tag = f"{sink}-{round_}"
                start = time.perf_counter()
                error = write(sink, tag)
                elapsed = time.perf_counter() - start
                entry[sink] = {
                    "rows_per_s": None if error else round(rows / elapsed),
                    "seconds": round(elapsed, 3),
                    "injected_failures": len(list(markers.glob(f"{tag}-*"))),
                    "error": error,
                }
                if sink == "overlay":
                    high = head()
                    for counter in counters.values():
                        counter.wait_for_number(high, QUIET)
                    entry["subscribers"] = {
                        str(i): _check_dict(c.check(rows, row_bytes)) for i, c in counters.items()
                    }
            rounds.append(entry)
        tree_after = describe_tree(manifest, STREAM)
    finally:
        spark.stop()
        root.close()
        for counter in counters.values():
            counter.client.close()

    overlay_rates = [r["overlay"]["rows_per_s"] for r in rounds if r["overlay"]["rows_per_s"]]
    plain_rates = [r["plain"]["rows_per_s"] for r in rounds if r["plain"]["rows_per_s"]]
    overlay_median = statistics.median(overlay_rates) if overlay_rates else None
    plain_median = statistics.median(plain_rates) if plain_rates else None
    checks: list[dict[str, Any]] = [c for r in rounds for c in r["subscribers"].values()]
    errors = [r[s]["error"] for r in rounds for s in ("overlay", "plain") if r[s]["error"]]
    return {
        "mode": "multi-node",
        "rows": rows,
        "row_bytes": row_bytes,
        "partitions": partitions,
        "repeats": repeats,
        "master": MASTER,
        "nodes": len(manifest.nodes),
        "fail_partitions": fail_partitions,
        "max_in_flight": max_in_flight,
        "stream": STREAM,
        "roles": asdict(roles),
        "tree": {"before": tree_before, "after": tree_after},
        "rounds": rounds,
        "overlay_median": overlay_median,
        "plain_median": plain_median,
        "ratio": (
            round(overlay_median / plain_median, 3) if overlay_median and plain_median else None
        ),
        "lost": sum(c["lost"] for c in checks),
        "duplicated": sum(c["duplicated"] for c in checks),
        "errors": errors,
        "exactly_once": not errors and all(c["exactly_once"] for c in checks),
    }


def _check_dict(check: RowCheck) -> dict[str, Any]:
    return {**asdict(check), "exactly_once": check.exactly_once}


def format_report(result: dict[str, Any]) -> str:
    """The report as text: the setup, each round, then the medians and the verdict."""
    roles = result["roles"]
    lines = [
        f"{result['rows']:,} rows of {result['row_bytes']} bytes, {result['partitions']} "
        f"partitions, {result['master']}, {result['nodes']} node processes in a ring; "
        f"failures injected in the first attempt of {result['fail_partitions']} partition(s)"
        + ("" if result["max_in_flight"] is None else f"; maxInFlight {result['max_in_flight']}"),
        f"  root node {roles['root']}, publishing through nodes {roles['publishers']}, "
        f"subscribers on nodes {roles['subscribers']}",
        "  tree: " + _tree_text(result["tree"]["before"]),
    ]
    if result["tree"]["after"] != result["tree"]["before"]:
        lines.append("  tree after the run: " + _tree_text(result["tree"]["after"]))
    for n, entry in enumerate(result["rounds"]):
        parts = []
        for sink in ("overlay", "plain"):
            run = entry[sink]
            rate = f"{run['rows_per_s']:,} rows/s" if run["rows_per_s"] else "FAILED"
            parts.append(f"{sink} {rate} ({run['injected_failures']} failures injected)")
        lines.append(f"  round {n}: " + ", ".join(parts))
        for sink in ("overlay", "plain"):
            if entry[sink]["error"]:
                lines.append(f"    {sink} write failed: {entry[sink]['error']}")
        for node, check in entry["subscribers"].items():
            lines.append(
                f"    subscriber on node {node}: {check['rows']:,}/{check['expected']:,} rows in "
                f"{check['packets']} packets, {check['lost']:,} lost, "
                f"{check['duplicated']:,} duplicated, {check['foreign']} foreign, "
                f"{check['packet_gaps']} packet-number gaps, {check['missed']} missed"
                + (f"; lost e.g. {list(check['lost_examples'])}" if check["lost_examples"] else "")
                + (
                    f"; duplicated e.g. {list(check['duplicated_examples'])}"
                    if check["duplicated_examples"]
                    else ""
                )
            )
    overlay, plain, ratio = result["overlay_median"], result["plain_median"], result["ratio"]
    lines += [
        f"  overlay sink (through {len(roles['publishers'])} nodes): "
        + (f"{overlay:12,.0f} rows/s (median)" if overlay else "no write succeeded"),
        "  plain TCP sink:                   "
        + (f"{plain:12,.0f} rows/s (median)" if plain else "no write succeeded"),
        f"  ratio: {ratio:.2f}" if ratio is not None else "  ratio: n/a",
        f"  exactly once: {'yes' if result['exactly_once'] else 'NO'} "
        f"({result['lost']:,} rows lost, {result['duplicated']:,} duplicated, "
        f"over all subscribers and rounds)",
        f"  load average: {load_text(result['load_average']['before'])} before, "
        f"{load_text(result['load_average']['after'])} after",
    ]
    return "\n".join(lines)


def _tree_text(tree: dict[int, dict[str, Any]]) -> str:
    return "; ".join(
        f"node {i} {view['state']}"
        + (f" under {view['parent']}" if view["parent"] is not None else "")
        + (f", {view['clients']} subscriber(s)" if view["clients"] else "")
        for i, view in sorted(tree.items())
    )
