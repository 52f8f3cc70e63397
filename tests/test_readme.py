"""The README's tour, run as a newcomer runs it: its own command lines, in a new shell whose
PATH has the virtual environment's ``bin`` (what ``. .venv/bin/activate`` does), in an empty
folder. Each line below must appear in the README as written, so the two cannot drift; only
the ports (the README's fixed ones may be taken on a shared machine) and the testnet's size
are changed before running. Waits are on output lines, each with a deadline.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_processes import DEADLINE, Lines

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
VENV_BIN = Path(sys.executable).parent

TWO_NODES = [
    "overlay node --identity a.key --listen 127.0.0.1:7701 --client 127.0.0.1:7702",
    "overlay node --identity b.key --listen 127.0.0.1:7711 --client 127.0.0.1:7712 "
    "--connect 127.0.0.1:7701",
    "overlay subscribe demo --node 127.0.0.1:7712",
    "overlay publish demo hello world --node 127.0.0.1:7702",
    "printf 'line one\\nline two\\n' | overlay publish demo --node 127.0.0.1:7712",
]
TESTNET = [
    "overlay testnet up --nodes 1000",
    "overlay testnet status",
    "overlay subscribe demo --node $(overlay testnet client 5)",
    "overlay publish demo hello --node $(overlay testnet client 9)",
    "overlay tree demo",
    "overlay stats | head",
    "overlay testnet kill 17; overlay testnet restart 17",
    "overlay testnet down",
]


def tour() -> str:
    """The README's tour section, up to the next heading."""
    match = re.search(r"^## A five-minute tour\n(.*?)^## ", README, re.S | re.M)
    assert match, "the README has no '## A five-minute tour' section"
    return match.group(1)


@pytest.mark.parametrize("line", TWO_NODES + TESTNET)
def test_each_command_is_in_the_readme_s_tour(line: str) -> None:
    assert line in tour(), f"the README's tour no longer says: {line}"


def test_the_readme_says_how_overlay_gets_on_path() -> None:
    assert ". .venv/bin/activate" in README


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    if not (VENV_BIN / "overlay").exists():
        pytest.skip(f"no overlay entry point in {VENV_BIN}")
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("OVERLAY_NODE", None)
    yield tmp_path, env


def sh(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def background(line: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``line &``: ``exec`` so that a signal reaches the command, not the shell."""
    return subprocess.Popen(
        ["bash", "-c", f"exec {line}"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_nodes_by_hand(shell: tuple[Path, dict[str, str]]) -> None:
    cwd, env = shell
    ports = dict(zip(("7701", "7702", "7711", "7712"), map(str, free_ports(4)), strict=True))
    lines = [re.sub(r"77\d\d", lambda m: ports[m.group(0)], line) for line in TWO_NODES]
    procs: list[subprocess.Popen[str]] = []
    try:
        for line in lines[:2]:
            node = background(line, cwd, env)
            procs.append(node)
            assert node.stdout is not None
            Lines(node.stdout).wait_for(r"clients\s+\S+")
        sub = background(lines[2], cwd, env)
        procs.append(sub)
        assert sub.stdout is not None and sub.stderr is not None
        Lines(sub.stderr).wait_for(r"^subscribed")
        first = sh(lines[3], cwd, env)
        assert (first.returncode, first.stdout.split()) == (0, ["0", "1"]), first.stderr
        second = sh(lines[4], cwd, env)
        assert (second.returncode, second.stdout.split()) == (0, ["2", "3"]), second.stderr
        got = Lines(sub.stdout)
        for expected in ("0 hello", "1 world", "2 line one", "3 line two"):
            assert got.wait_for(r"^.+").group(0) == expected
        # Ctrl-C on the subscriber and one node, SIGTERM (``kill %1``) on the other.
        for proc, signum, status in (
            (sub, signal.SIGINT, 130),
            (procs[0], signal.SIGINT, 130),
            (procs[1], signal.SIGTERM, 143),
        ):
            proc.send_signal(signum)
            assert proc.wait(timeout=DEADLINE) == status
            assert proc.stderr is not None
            assert "Traceback" not in proc.stderr.read()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=DEADLINE)
    assert {p.name for p in cwd.iterdir()} >= {"a.key", "b.key"}


def test_a_testnet(shell: tuple[Path, dict[str, str]]) -> None:
    cwd, env = shell
    lines = [line.replace("--nodes 1000", "--nodes 20") for line in TESTNET]
    sub = None
    try:
        up = sh(lines[0], cwd, env)
        assert up.returncode == 0 and "ready: 20 nodes linked" in up.stdout, up.stderr
        status = sh(lines[1], cwd, env)
        assert status.returncode == 0 and "nodes: 20 alive" in status.stdout, status.stderr
        sub = background(lines[2], cwd, env)
        assert sub.stdout is not None and sub.stderr is not None
        Lines(sub.stderr).wait_for(r"^subscribed")
        published = sh(lines[3], cwd, env)
        assert (published.returncode, published.stdout.split()) == (0, ["0"]), published.stderr
        assert Lines(sub.stdout).wait_for(r"^0 hello$")
        tree = sh(lines[4], cwd, env)
        assert tree.returncode == 0 and "root" in tree.stdout, tree.stdout + tree.stderr
        stats = sh(lines[5], cwd, env)
        assert stats.returncode == 0 and len(stats.stdout.splitlines()) == 10, stats.stderr
        again = sh(lines[6], cwd, env)
        assert again.returncode == 0, again.stderr
        assert "node 17 restarted" in again.stdout
    finally:
        if sub is not None:
            sub.kill()
            sub.wait(timeout=DEADLINE)
        down = sh(lines[7], cwd, env)
    assert down.returncode == 0 and "is down" in down.stdout, down.stderr


def test_the_spark_testnet_s_ports_miss_the_two_nodes_ports() -> None:
    """Someone following the tour may still have the two hand-started nodes up."""
    hand = {int(port) for line in TWO_NODES for port in re.findall(r":(\d+)", line)}
    match = re.search(r"overlay testnet up --nodes (\d+) --base-port (\d+)", tour())
    assert match, "the tour's Spark step no longer gives --base-port"
    nodes, base = map(int, match.groups())
    assert not hand & set(range(base, base + 2 * nodes))
