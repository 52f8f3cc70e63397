"""The ``overlay`` command as a user runs it: real processes, real sockets.

Two ``overlay node`` processes on loopback (port 0: the kernel picks, the node prints what it
got), ``overlay subscribe`` on one, ``overlay publish`` on the other. Waits are on the
processes' own output lines, each with a deadline, never on sleeps.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import signal
import socket
import struct
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_processes import DEADLINE, OVERLAY, Lines, overlay

from overlay.client import Client
from tools import cli


def start_node(tmp: Path, name: str, *extra: str) -> tuple[subprocess.Popen[str], str, str]:
    """Start ``overlay node``; return it with its peer and client addresses."""
    proc = subprocess.Popen(
        [
            *OVERLAY,
            "node",
            "--identity",
            str(tmp / f"{name}.key"),
            "--listen",
            "127.0.0.1:0",
            "--client",
            "127.0.0.1:0",
            "--network",
            "cli-test",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines = Lines(proc.stdout)
    peers = lines.wait_for(r"peers\s+(\S+)").group(1)
    clients = lines.wait_for(r"clients\s+(\S+)").group(1)
    return proc, peers, clients


@pytest.fixture
def two_nodes(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two linked nodes; yields their client addresses."""
    a, a_peers, a_clients = start_node(tmp_path, "a")
    b = None
    try:
        b, _, b_clients = start_node(tmp_path, "b", "--connect", a_peers)
        yield a_clients, b_clients
    finally:
        for proc in (a, b):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=DEADLINE)


def test_publish_on_one_node_subscribe_on_another(two_nodes: tuple[str, str]) -> None:
    a, b = two_nodes
    sub = subprocess.Popen(
        [*OVERLAY, "subscribe", "demo", "--node", b, "--count", "4", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert sub.stderr is not None
        Lines(sub.stderr).wait_for(r"^subscribed")
        first = overlay("publish", "demo", "hello", "world", "--node", a)
        assert first.returncode == 0, first.stderr
        assert first.stdout.split() == ["0", "1"]
        second = overlay("publish", "ovl:open/demo", "--node", b, stdin="line one\nline two\n")
        assert second.returncode == 0, second.stderr
        assert second.stdout.split() == ["2", "3"]
        sub.wait(timeout=DEADLINE)
        assert sub.stdout is not None
        out = sub.stdout.read()
    finally:
        sub.kill()
    assert sub.returncode == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        {"packet": 0, "data": "hello", "epoch": None},
        {"packet": 1, "data": "world", "epoch": None},
        {"packet": 2, "data": "line one", "epoch": None},
        {"packet": 3, "data": "line two", "epoch": None},
    ]


def test_stats_counts_each_link_once_and_not_its_own_query(
    two_nodes: tuple[str, str],
) -> None:
    a, b = two_nodes
    sub = subprocess.Popen(
        [*OVERLAY, "subscribe", "demo", "--node", b],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert sub.stderr is not None
        Lines(sub.stderr).wait_for(r"^subscribed")
        result = overlay("stats", "--nodes", a, b)
    finally:
        sub.terminate()
        sub.wait(timeout=DEADLINE)
    assert result.returncode == 0, result.stderr
    head, row_a, row_b, total = result.stdout.splitlines()[:4]
    links, clients = head.split().index("links"), head.split().index("clients")
    assert [row.split()[links] for row in (row_a, row_b)] == ["1", "1"]
    assert [row.split()[clients] for row in (row_a, row_b)] == ["0", "1"]
    # The total row has "answered/asked" where the rows have a location: one field less.
    assert total.split()[0] == "total" and total.split()[1] == "2/2"
    assert (total.split()[links], total.split()[clients]) == ("1", "1")


def test_signed_stream_needs_its_key(two_nodes: tuple[str, str], tmp_path: Path) -> None:
    a, _ = two_nodes
    made = overlay("keygen", "--stream", "news", str(tmp_path / "news.key"))
    assert made.returncode == 0, made.stderr
    address = re.search(r"(ovl:\S+/news)", made.stdout).group(1)  # type: ignore[union-attr]
    assert os.stat(tmp_path / "news.key").st_mode & 0o777 == 0o600
    signed = overlay("publish", address, "scoop", "--key", str(tmp_path / "news.key"), "--node", a)
    assert (signed.returncode, signed.stdout.split()) == (0, ["0"]), signed.stderr
    unsigned = overlay("publish", address, "fake", "--node", a)
    assert unsigned.returncode == 2 and "needs its key file" in unsigned.stderr
    other = overlay("keygen", "--stream", "news", str(tmp_path / "other.key"))
    assert other.returncode == 0
    wrong = overlay("publish", address, "fake", "--key", str(tmp_path / "other.key"), "--node", a)
    assert wrong.returncode == 2 and "holds the key of" in wrong.stderr


def test_a_node_killed_and_started_again_numbers_on(tmp_path: Path) -> None:
    """Its state file (``<identity>.state``) keeps how far each stream got: the stream it
    roots alone comes back numbering on, not from 0, after a kill -9."""
    node, _, clients = start_node(tmp_path, "alone")
    try:
        first = overlay("publish", "demo", "a", "b", "c", "--node", clients)
        assert (first.returncode, first.stdout.split()) == (0, ["0", "1", "2"]), first.stderr
    finally:
        node.kill()  # no goodbye: what it kept, it kept as it went
        node.wait(timeout=DEADLINE)
    assert (tmp_path / "alone.state").exists()
    node, _, clients = start_node(tmp_path, "alone")
    try:
        again = overlay("publish", "demo", "d", "--node", clients)
        assert (again.returncode, again.stdout.split()) == (0, ["3"]), again.stderr
    finally:
        node.terminate()
        node.wait(timeout=DEADLINE)


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_a_signal_stops_a_node_cleanly(tmp_path: Path, signum: int, status: int) -> None:
    """Ctrl-C or SIGTERM: no traceback, exit 128 + the signal's number, and the state file
    left for the next start to number on from."""
    node = subprocess.Popen(
        [*OVERLAY, "node", "--identity", str(tmp_path / "n.key"),
         "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0", "--network", "cli-test"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert node.stdout is not None and node.stderr is not None
        clients = Lines(node.stdout).wait_for(r"clients\s+(\S+)").group(1)
        first = overlay("publish", "demo", "a", "b", "--node", clients)
        assert (first.returncode, first.stdout.split()) == (0, ["0", "1"]), first.stderr
        node.send_signal(signum)
        assert node.wait(timeout=DEADLINE) == status
        stderr = node.stderr.read()
    finally:
        node.kill()
        node.wait(timeout=DEADLINE)
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    again, _, clients = start_node(tmp_path, "n")
    try:
        more = overlay("publish", "demo", "c", "--node", clients)
        assert (more.returncode, more.stdout.split()) == (0, ["2"]), more.stderr
    finally:
        again.terminate()
        again.wait(timeout=DEADLINE)


def test_a_damaged_state_file_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "n.state").write_bytes(b"\xff\xff not cbor")
    result = overlay("node", "--identity", str(tmp_path / "n.key"), "--listen", "127.0.0.1:0")
    assert result.returncode == 2, result.stderr
    assert "n.state: not a state file" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_second_node_on_the_same_state_file_is_refused(tmp_path: Path) -> None:
    shared = str(tmp_path / "shared.state")
    node, _, _ = start_node(tmp_path, "first", "--state", shared)
    try:
        second = overlay(
            "node", "--identity", str(tmp_path / "second.key"), "--state", shared,
            "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0",
        )  # fmt: skip
    finally:
        node.terminate()
        node.wait(timeout=DEADLINE)
    assert second.returncode == 2 and "in use by another running node" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("role", ["peers", "clients"])
def test_a_port_in_use_is_one_line_naming_it(tmp_path: Path, role: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        ports = {"peers": busy, "clients": "127.0.0.1:0"} if role == "peers" else {
            "peers": "127.0.0.1:0", "clients": busy}  # fmt: skip
        result = overlay(
            "node", "--identity", str(tmp_path / "n.key"),
            "--listen", ports["peers"], "--client", ports["clients"],
        )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert f"cannot listen for {role} on {busy}: address already in use" in result.stderr
    assert "Errno" not in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["publish", "demo", "x", "--node", "127.0.0.1:1"],
            "cannot connect to a node at 127.0.0.1:1: Connection refused",
        ),
        (["subscribe", "demo", "--node", "127.0.0.1:1"], "cannot connect to a node at"),
        (["stats", "--nodes", "127.0.0.1:1"], ""),
        (["tree", "demo", "--nodes", "127.0.0.1:1"], "127.0.0.1:1 did not answer"),
    ],
)
def test_no_node_there_is_one_clear_line_and_exit_1(args: list[str], says: str) -> None:
    """The command was right but the network said no: exit 1, not a usage error's 2."""
    result = overlay(*args)
    assert result.returncode == 1, result.stderr
    assert says in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["subscribe", "ovl:zzz/x"], "the key part 'zzz'"),
        (["publish", "my stream", "x"], "contains whitespace"),
        (["subscribe", "http://example/x"], "looks like a URL"),
        (["publish", "demo", "x", "--node", "http://h:1"], "client port is plain TCP"),
        (
            ["publish", "demo", "x", "--node", "localhost"],
            "--node: bad node address 'localhost': no port; expected host:port",
        ),
        (["subscribe", "demo", "--node", "tcp://localhost"], "--node: bad node address"),
        (["stats", "--nodes", "127.0.0.1:1", "localhost"], "--nodes: bad node address"),
        (["node", "--listen", "127.0.0.1:99999"], "port must be a number"),
        (["node", "--connect", "nohost"], "bad address 'nohost'"),
        (["node", "--config", "/nonexistent/node.toml"], "no such config file"),
        (["node", "--location", "1.5"], "--location must be in [0, 1)"),
        (["publish", "demo", "x", "--key", "/nonexistent.key"], "open stream: it takes no key"),
        (["subscribe", "demo", "--count", "0"], "--count must be at least 1"),
        (["subscribe", "demo", "--timeout", "0"], "--timeout must be more than 0 seconds"),
        (["publish", "demo", "x", "--timeout", "-1"], "--timeout must be more than 0 seconds"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(args: list[str], says: str) -> None:
    result = overlay(*args)
    assert result.returncode == 2
    assert says in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_peer_port_given_as_node_is_one_clear_line(tmp_path: Path) -> None:
    node, peers, _ = start_node(tmp_path, "a")
    try:
        for args in (["publish", "demo", "x"], ["subscribe", "demo"]):
            result = overlay(*args, "--node", peers)
            assert result.returncode == 1, result.stderr
            assert f"{peers} closed the connection" in result.stderr
            assert "probably a node's peer port, not its client port" in result.stderr
            assert "Traceback" not in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1
    finally:
        node.terminate()
        node.wait(timeout=DEADLINE)


def test_bad_config_file_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "node.toml"
    config.write_text('[node]\nlisten = "127.0.0.1:0"\ncolour = "blue"\n')
    result = overlay("node", "--config", str(config))
    assert result.returncode == 2 and "unknown key 'colour' in [node]" in result.stderr
    config.write_text("[limits]\nheartbeat_interval = 30.0\n")
    result = overlay("node", "--config", str(config))
    assert result.returncode == 2 and "heartbeat_interval" in result.stderr
    config.write_text("[node\n")  # not TOML: the parser's reason, with the file's name
    result = overlay("node", "--config", str(config))
    assert result.returncode == 2 and result.stderr.startswith(f"overlay node: {config}: ")
    assert "line 1" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_keygen_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "node.key"
    assert overlay("keygen", str(path)).returncode == 0
    before = path.read_text()
    again = overlay("keygen", str(path))
    assert again.returncode == 2 and path.read_text() == before
    assert "--force" in again.stderr and "overwrite=True" not in again.stderr, again.stderr
    forced = overlay("keygen", "--force", str(path))
    assert forced.returncode == 0 and path.read_text() != before


def test_no_command_prints_the_command_list_and_exits_2() -> None:
    result = overlay()
    assert result.returncode == 2 and result.stdout == ""
    for command in ("keygen", "node", "publish", "subscribe", "testnet", "tree", "stats"):
        assert re.search(rf"^\s+{command}\s", result.stderr, re.MULTILINE), result.stderr


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_help_shows_no_restructuredtext_marks() -> None:
    """Every command's help is plain text, though descriptions are module docstrings."""
    helps = {p.prog: p.format_help() for p in _parsers(cli.build_parser())}
    assert len(helps) > 15 and "overlay testnet chaos" in helps
    assert not [prog for prog, text in helps.items() if "``" in text]
    shown = overlay("tree", "--help")
    assert shown.returncode == 0 and "``" not in shown.stdout and "--manifest" in shown.stdout


def test_demo_and_chaos_options_say_what_they_are_and_their_defaults() -> None:
    for command in (["testnet", "demo"], ["testnet", "chaos"]):
        shown = overlay(*command, "--help")
        assert shown.returncode == 0, shown.stderr
        text = " ".join(shown.stdout.split())
        for option in ("--subscribers", "--packets", "--seed", "--rate", "--nodes"):
            if option == "--packets" and command[1] == "chaos":
                continue
            match = re.search(re.escape(option) + r" [A-Z_]+ (.*?)(?= --|$)", text)
            assert match, f"{command} {option} has no help"
            if option != "--nodes" or command[1] == "demo":
                assert "(default: " in match.group(1), f"{command} {option}: {match.group(1)}"


def test_version_is_the_package_version() -> None:
    result = overlay("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"overlay {cli.version()}")
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", cli.version())


def test_version_without_an_installed_package_is_pyproject_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    pyproject = tomllib.loads((Path(cli.__file__).parent.parent / "pyproject.toml").read_text())
    assert cli.version() == pyproject["project"]["version"]


def test_subscribe_timeout_says_what_it_waited_for(tmp_path: Path) -> None:
    """A node whose only peer is unreachable holds its searches until one is up, so a
    subscription there is never confirmed: the timeout must say so in plain words."""
    node, _, clients = start_node(tmp_path, "lonely", "--connect", "127.0.0.1:1")
    try:
        result = overlay("subscribe", "demo", "--node", clients, "--timeout", "1")
    finally:
        node.terminate()
        node.wait(timeout=DEADLINE)
    assert result.returncode == 1, result.stderr
    assert "waited 1.0 s for the subscription's confirmation from" in result.stderr
    assert "no the" not in result.stderr


def test_unreachable_peers_are_warned_of_and_named_in_a_publish_s_timeout(
    tmp_path: Path,
) -> None:
    """At the default log level a node says which --connect peer it cannot dial and why,
    and a publish or a subscribe that times out there says the node has no peer up."""
    config = tmp_path / "node.toml"
    config.write_text("[limits]\npublish_timeout = 0.5\npublish_attempts = 1\n")
    node = subprocess.Popen(
        [*OVERLAY, "node", "--config", str(config), "--identity", str(tmp_path / "n.key"),
         "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0", "--network", "cli-test",
         "--connect", "127.0.0.1:1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert node.stdout is not None
        lines = Lines(node.stdout)
        clients = lines.wait_for(r"clients\s+(\S+)").group(1)
        lines.wait_for(r"WARNING cannot dial peer 127\.0\.0\.1:1: Connection refused$")
        result = overlay("publish", "demo", "x", "--node", clients)
        joined = overlay("subscribe", "demo", "--node", clients, "--timeout", "1")
    finally:
        node.terminate()
        node.wait(timeout=DEADLINE)
    assert result.returncode == 1, result.stderr
    assert "no answer from the stream's root" in result.stderr
    assert "this node has no peer up" in result.stderr
    assert joined.returncode == 1, joined.stderr
    assert "subscription's confirmation" in joined.stderr
    assert "this node has no peer up" in joined.stderr


def test_a_reader_that_goes_away_is_no_error(tmp_path: Path) -> None:
    """``overlay stats | head``: the pipe closes under the command; it stops quietly."""
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as closed_pipe:
        result = subprocess.run(
            [*OVERLAY, "keygen", str(tmp_path / "k.key")],
            stdout=closed_pipe,
            stderr=subprocess.PIPE,
            text=True,
            timeout=DEADLINE,
        )
    assert (result.returncode, result.stderr) == (0, "")


def _rows_packet(rows: list[tuple[bytes | None, bytes]]) -> bytes:
    """One packet of rows in the Spark sink's framing (overlay/spark/rows.py), by hand."""
    lengths = [len(v) for _, v in rows] + [-1 if k is None else len(k) for k, _ in rows]
    values = b"".join(v for _, v in rows)
    keys = b"".join(k for k, _ in rows if k is not None)
    header = struct.pack("<4sBI", b"OVR1", 1, len(rows))
    return header + struct.pack(f"<{len(lengths)}i", *lengths) + values + keys


def test_subscribe_rows_unpacks_the_spark_sinks_packets(two_nodes: tuple[str, str]) -> None:
    a, b = two_nodes
    sub = subprocess.Popen(
        [*OVERLAY, "subscribe", "rows", "--node", b, "--count", "2", "--rows"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert sub.stderr is not None
        Lines(sub.stderr).wait_for(r"^subscribed")
        with Client(a) as client:
            client.publish("rows", _rows_packet([(b"k1", b"v1"), (None, b"v2")]))
            client.publish("rows", b"plain text, not rows")
        sub.wait(timeout=DEADLINE)
        assert sub.stdout is not None
        out = sub.stdout.read()
    finally:
        sub.kill()
    assert out.splitlines() == ["0.0 k1: v1", "0.1 v2"]
    assert sub.returncode == 2  # the second packet is no packet of rows: said, not guessed


@pytest.fixture
def one_node(tmp_path: Path) -> Iterator[str]:
    """A node on its own (the root of every stream); yields its client address."""
    node, _, clients = start_node(tmp_path, "solo")
    try:
        yield clients
    finally:
        node.terminate()
        node.wait(timeout=DEADLINE)


def test_publish_from_a_pipe_prints_each_number_as_its_line_is_answered(one_node: str) -> None:
    """``tail -f log | overlay publish logs``: a line's number shows while the input is
    still open, not when it ends (nor after 256 lines), and each reaches a pipe at once."""
    pub = subprocess.Popen(
        [*OVERLAY, "publish", "piped", "--node", one_node],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert pub.stdin is not None and pub.stdout is not None
        out = Lines(pub.stdout)
        pub.stdin.write("first\n")
        pub.stdin.flush()
        out.wait_for(r"^0$")
        pub.stdin.write("second\r\nthird")  # (a last line without its line ending counts)
        pub.stdin.close()
        out.wait_for(r"^1$")
        out.wait_for(r"^2$")
        assert pub.wait(timeout=DEADLINE) == 0
    finally:
        pub.kill()
        pub.wait(timeout=DEADLINE)
    got = overlay("subscribe", "piped", "--node", one_node, "--last-seen", "0", "--count", "2")
    assert got.stdout.splitlines() == ["1 second", "2 third"], got.stderr


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_a_signal_ends_a_subscription_cleanly(one_node: str, signum: int, status: int) -> None:
    sub = subprocess.Popen(
        [*OVERLAY, "subscribe", "demo", "--node", one_node],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert sub.stderr is not None
        errors = Lines(sub.stderr)
        errors.wait_for(r"^subscribed")
        sub.send_signal(signum)
        assert sub.wait(timeout=DEADLINE) == status
    finally:
        sub.kill()
        sub.wait(timeout=DEADLINE)
    assert errors.rest() == []  # no traceback


def test_a_subscription_whose_reader_goes_away_ends_quietly(one_node: str) -> None:
    """``overlay subscribe demo | head -1``: once head exits, the next packet ends the
    subscription with status 0 and nothing on stderr past the subscribed line."""
    sub = subprocess.Popen(
        [*OVERLAY, "subscribe", "demo", "--node", one_node],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert sub.stdout is not None and sub.stderr is not None
        errors = Lines(sub.stderr)
        errors.wait_for(r"^subscribed")
        assert overlay("publish", "demo", "one", "--node", one_node).returncode == 0
        assert sub.stdout.readline() == "0 one\n"  # (as head -1 reads it)
        sub.stdout.close()
        assert overlay("publish", "demo", "two", "--node", one_node).returncode == 0
        assert sub.wait(timeout=DEADLINE) == 0
    finally:
        sub.kill()
        sub.wait(timeout=DEADLINE)
    assert errors.seen == ["subscribed; newest packet: none yet\n"] and errors.rest() == []


def test_overlay_node_is_the_default_node_address(one_node: str) -> None:
    """``OVERLAY_NODE`` stands in for ``--node``; ``--node`` still wins; a bad value is a
    usage error that names the variable, since the command line does not show it."""

    def run(*args: str, env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*OVERLAY, *args], capture_output=True, text=True, timeout=DEADLINE,
            env={**os.environ, "OVERLAY_NODE": env},
        )  # fmt: skip

    published = run("publish", "env-stream", "a", env=one_node)
    assert (published.returncode, published.stdout) == (0, "0\n"), published.stderr
    overridden = run("publish", "env-stream", "b", "--node", one_node, env="127.0.0.1:1")
    assert (overridden.returncode, overridden.stdout) == (0, "1\n"), overridden.stderr
    got = run("subscribe", "env-stream", "--last-seen", "0", "--count", "1", env=one_node)
    assert got.stdout == "1 b\n", got.stderr
    bad = run("publish", "env-stream", "c", env="http://h:1")
    assert bad.returncode == 2 and bad.stderr.startswith(
        "overlay publish: OVERLAY_NODE='http://h:1'"
    )


def test_publish_json_is_one_object_per_packet(one_node: str) -> None:
    result = overlay(
        "publish", "json-stream", "a", "b", "--epoch", "4", "--json", "--node", one_node
    )
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"packet": 0, "epoch": 4},
        {"packet": 1, "epoch": 4},
        {"epoch": 4, "closed_at": 2},
    ]


@pytest.mark.parametrize("command", [["stats"], ["tree", "demo"]])
@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_a_signal_stops_a_survey_cleanly(command: list[str], signum: int, status: int) -> None:
    """A node that accepts and never answers holds ``stats`` and ``tree`` until their
    timeout; a signal ends them at once, with no traceback."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        proc = subprocess.Popen(
            [*OVERLAY, *command, "--nodes", address],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            silent.settimeout(DEADLINE)
            connection, _ = silent.accept()  # the survey is asking: mid-run
            with connection:  # (held open, unanswered, until the command has ended)
                proc.send_signal(signum)
                _, stderr = proc.communicate(timeout=DEADLINE)
        finally:
            proc.kill()
            proc.wait(timeout=DEADLINE)
    assert proc.returncode == status, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr


def test_main_leaves_its_callers_sigterm_handler_as_it_was(tmp_path: Path) -> None:
    """``cli.main`` may run inside another program (this test runner): SIGTERM is taken as
    Ctrl-C only while a command runs."""
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["testnet", "down", "--dir", str(tmp_path)]) == 0
    assert signal.getsignal(signal.SIGTERM) is before
