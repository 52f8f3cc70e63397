"""``overlay testnet`` through the real command line: worker processes, control ports, the
manifest, and the errors a user meets. Each command is a subprocess, as a user runs it;
the testnet is always taken down (and its workers killed if ``down`` fails) at the end."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from testnet.launcher import worker_alive
from testnet.manifest import Manifest, NodeEntry, read_manifest, write_manifest

ROOT = Path(__file__).resolve().parent.parent


def overlay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_up_status_kill_restart_down_over_two_processes(testnet_dir: Path) -> None:
    d = ["--dir", str(testnet_dir)]
    up = overlay("testnet", "up", "--nodes", "30", "--processes", "2", "--seed", "5", *d)
    assert up.returncode == 0, up.stderr
    assert "ready: 30 nodes linked" in up.stdout
    manifest = read_manifest(testnet_dir)
    assert len(manifest.nodes) == 30 and len(manifest.workers) == 2
    assert {n.worker for n in manifest.nodes} == {0, 1}
    assert all(worker_alive(w.pid) for w in manifest.workers)

    status = overlay("testnet", "status", *d)
    assert status.returncode == 0, status.stderr
    assert "nodes: 30 alive" in status.stdout
    assert "every live node is linked to all its live neighbours" in status.stdout

    # Node 20 lives in the second worker; its neighbours span both.
    assert overlay("testnet", "kill", "20", *d).returncode == 0
    status = overlay("testnet", "status", *d)
    assert status.returncode == 1
    assert "29 alive, 1 not answering: 20" in status.stdout
    as_json = overlay("testnet", "status", "--json", *d)
    assert as_json.returncode == 1, as_json.stderr
    report = json.loads(as_json.stdout)
    assert [n["index"] for n in report["nodes"]] == list(range(30))
    node20 = report["nodes"][20]
    assert (node20["alive"], node20["killed"], node20["links"]) == (False, True, [])
    assert node20["client"] == manifest.nodes[20].client
    assert all(n["alive"] and not n["killed"] for n in report["nodes"] if n["index"] != 20)
    linked = {(i, j) for i, j in report["links"]}
    assert all(i < j for i, j in linked) and not any(20 in pair for pair in linked)
    for n in report["nodes"]:  # each link once, seen from both ends
        assert all((min(n["index"], j), max(n["index"], j)) in linked for j in n["links"])
    tree = overlay("tree", "nobody-subscribed", "--manifest", str(testnet_dir))
    assert tree.returncode == 0, tree.stdout + tree.stderr
    assert "node 20 is down (killed)" in tree.stderr and "did not answer" not in tree.stderr
    restart = overlay("testnet", "restart", "20", *d)
    assert restart.returncode == 0, restart.stderr
    assert "linked to its live neighbours" in restart.stdout
    assert overlay("testnet", "status", *d).returncode == 0

    stats = overlay("stats", "--manifest", str(testnet_dir))
    assert stats.returncode == 0 and stats.stdout.count("\nnode ") == 30
    tree = overlay("tree", "nobody-subscribed", "--manifest", str(testnet_dir))
    assert tree.returncode == 0 and "no node that answered carries this stream" in tree.stdout

    again = overlay("testnet", "up", "--nodes", "4", *d)
    assert again.returncode == 2 and "already running" in again.stderr

    down = overlay("testnet", "down", *d)
    assert down.returncode == 0, down.stderr
    assert not any(worker_alive(w.pid) for w in manifest.workers)
    assert not (testnet_dir / "manifest.json").exists()


def test_commands_without_a_testnet_say_so_in_one_line(tmp_path: Path) -> None:
    for args in (
        ["testnet", "status", "--dir", str(tmp_path)],
        ["testnet", "kill", "3", "--dir", str(tmp_path)],
        ["stats", "--manifest", str(tmp_path)],
    ):
        result = overlay(*args)
        assert result.returncode == 2, args
        assert result.stderr.count("\n") == 1, result.stderr
        assert "no testnet running" in result.stderr


def test_down_without_a_testnet_says_so_and_succeeds(tmp_path: Path) -> None:
    """Nothing to stop is what ``down`` was asked for: a cleanup script may always run it."""
    result = overlay("testnet", "down", "--dir", str(tmp_path))
    assert (result.returncode, result.stdout) == (0, ""), result.stderr
    assert result.stderr == f"overlay testnet: no testnet running in {tmp_path}: nothing to stop\n"


@pytest.mark.slow
def test_bad_node_index_and_port_in_use(testnet_dir: Path) -> None:
    d = ["--dir", str(testnet_dir)]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        if port > 65535 - 16:
            pytest.skip("the kernel gave a port too near the top")
        up = overlay("testnet", "up", "--nodes", "4", "--base-port", str(port), *d)
        assert up.returncode == 2
        assert up.stderr.count("\n") == 1 and "in use" in up.stderr, up.stderr
    assert not (testnet_dir / "manifest.json").exists()

    assert overlay("testnet", "up", "--nodes", "6", *d).returncode == 0
    for bad, words in (
        ("99", "out of range: this testnet has nodes 0..5"),
        ("-1", "must not be negative"),
        ("abc", "must be a number"),
    ):
        result = overlay("testnet", "kill", bad, *d)
        assert result.returncode == 2, result
        assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr


@pytest.mark.slow
def test_a_testnet_whose_every_node_restarts_numbers_its_streams_on(testnet_dir: Path) -> None:
    # Each node keeps a state file in DIR/state (an earlier testnet's are cleared), as an
    # ``overlay node`` does: restarted, the stream's numbering goes on from where it was.
    d = ["--dir", str(testnet_dir)]
    (testnet_dir / "state").mkdir(parents=True)
    (testnet_dir / "state" / "node-7.state").write_bytes(b"an earlier testnet's")
    assert overlay("testnet", "up", "--nodes", "3", "--seed", "2", *d).returncode == 0
    names = sorted(p.name for p in (testnet_dir / "state").iterdir() if p.suffix == ".state")
    assert names == ["node-0.state", "node-1.state", "node-2.state"]
    node = ["--node", overlay("testnet", "client", "1", *d).stdout.strip()]
    first = overlay("publish", "numbering-stream", "a", "b", "c", *node)
    assert first.returncode == 0 and first.stdout.split() == ["0", "1", "2"], first.stderr
    for i in ("0", "1", "2"):
        assert overlay("testnet", "kill", i, *d).returncode == 0
    for i in ("0", "1", "2"):
        assert overlay("testnet", "restart", i, *d).returncode == 0
    again = overlay("publish", "numbering-stream", "d", *node)
    assert again.returncode == 0 and again.stdout.split() == ["3"], again.stderr


def test_ctrl_c_stops_the_demo_cleanly() -> None:
    """Ctrl-C mid-demo: its nodes stop, no traceback, exit status 130 (128 + SIGINT)."""
    demo = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", "testnet", "demo", "--nodes", "12",
         "--subscribers", "2", "--packets", "1000", "--rate", "50"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert demo.stdout is not None
        for line in demo.stdout:  # mid-run: once the clients are subscribing
            if line.startswith("[2/5]"):
                break
        demo.send_signal(signal.SIGINT)
        _, stderr = demo.communicate(timeout=60)
    finally:
        demo.kill()
        demo.wait(timeout=60)
    assert demo.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr


def _stopped_by(signum: int, args: list[str], after: str) -> tuple[int, str, str]:
    """Run ``overlay ARGS``, send ``signum`` once a stdout line contains ``after``; its
    exit status, everything it printed before and after, and its stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if after in line:
                break
        else:
            raise AssertionError(f"no line with {after!r} in {seen}")
        proc.send_signal(signum)
        rest, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    return proc.returncode, "".join(seen) + rest, stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_a_signal_during_up_stops_its_workers(testnet_dir: Path, signum: int, status: int) -> None:
    """The workers run in their own sessions, so no signal reaches them: the launcher,
    stopped while it starts them, stops those it started, and leaves no plan (their keys)."""
    args = ["testnet", "up", "--nodes", "40", "--processes", "2", "--dir", str(testnet_dir)]
    returncode, out, stderr = _stopped_by(signum, args, "worker 0 (pid")
    assert returncode == status, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    pids = [int(word) for word in out.replace(")", " ").split() if word.isdigit()]
    assert pids and not any(worker_alive(pid) for pid in pids), out
    assert not (testnet_dir / "manifest.json").exists()
    assert not list(testnet_dir.glob("*.plan.json"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_a_signal_stops_an_in_process_chaos_run_cleanly(signum: int, status: int) -> None:
    args = ["testnet", "chaos", "--nodes", "8", "--subscribers", "2", "--duration", "120"]
    returncode, _, stderr = _stopped_by(signum, args, "subscribers joined")
    assert returncode == status, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr


def test_a_signal_stops_status_while_it_waits_for_a_node(tmp_path: Path) -> None:
    """``status`` asks every node; one that accepts and never answers holds it until its
    timeout. Ctrl-C then ends it at once: exit 130, no traceback."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        node = NodeEntry(0, "x", 0.5, address, address, 0, ())
        write_manifest(tmp_path, Manifest(0, 1, "t", (node,), (), 0.0, 0.0))
        proc = subprocess.Popen(
            [sys.executable, "-m", "tools.cli", "testnet", "status", "--dir", str(tmp_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        try:
            silent.settimeout(60)
            connection, _ = silent.accept()  # status is asking: mid-run
            with connection:  # (held open, unanswered, until the command has ended)
                proc.send_signal(signal.SIGINT)
                _, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
            proc.wait(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr


@pytest.mark.slow
def test_chaos_stopped_by_a_signal_leaves_the_testnet_whole(testnet_dir: Path) -> None:
    """The testnet outlives the chaos run: the nodes it had killed come back when it is
    stopped, rather than staying dead until someone restarts them by hand."""
    d = ["--dir", str(testnet_dir)]
    assert overlay("testnet", "up", "--nodes", "12", *d).returncode == 0
    args = ["testnet", "chaos", "--rate", "5", "--downtime", "60", "--duration", "120"]
    args += ["--subscribers", "2", *d]
    returncode, out, stderr = _stopped_by(signal.SIGINT, args, "killed node")
    assert returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    assert "restarted node" in out, out
    status = overlay("testnet", "status", *d)
    assert status.returncode == 0 and "nodes: 12 alive" in status.stdout, status.stdout
