"""The simulator's commands as processes: their exit, their status when stopped, a closed
reader, and the collector they pause."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest

from testnet.sim.collector import collector_paused


def _command(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (a ``main`` handed to ``run_command``) in a real process."""
    program = "import os, signal, sys\nfrom testnet.sim.collector import run_command\n" + code
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_command_exits_with_its_report_flushed_and_its_code() -> None:
    """``python -m testnet.sim`` ends without the interpreter's teardown (``exit_now``):
    its whole report still reaches a pipe, and its exit code is the run's."""
    argv = ["--nodes", "200", "--streams", "2", "--subscribers", "5", "--packets", "5"]
    done = subprocess.run(
        [sys.executable, "-m", "testnet.sim", *argv, "--route-samples", "20", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["violation_count"] == 0 and report["deliveries"] == 50
    assert report["proximity"] == 16  # the default graph: proximity neighbour selection


def test_proximity_is_a_positive_count_of_choices() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "testnet.sim", "--proximity", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith("argument --proximity: must be at least 1, got 0")
    )


def test_the_command_line_pauses_the_collector_for_a_run_and_restores_it() -> None:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with collector_paused():
        assert not gc.isenabled()
        made = [[i] for i in range(1000)]
    assert gc.isenabled()
    # What the run made is out of the collector's reach: re-enabling does not traverse it.
    assert gc.get_freeze_count() >= frozen + len(made)
    gc.unfreeze()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # a caller's own setting is kept
    finally:
        gc.enable()


@pytest.mark.parametrize(("signum", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_command_stopped_by_a_signal_exits_128_plus_its_number_without_a_traceback(
    signum: str, status: int
) -> None:
    done = _command(
        "def main():\n"
        f"    os.kill(os.getpid(), signal.{signum})\n"
        "    while True:\n"
        "        pass\n"
        "run_command(main)\n"
    )
    assert (done.returncode, done.stderr) == (status, "")


def test_a_command_whose_reader_went_away_ends_quietly() -> None:
    """``python -m testnet.sim ... | head``: the report's writes meet a closed pipe."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "from testnet.sim.collector import run_command\n"
                "def main():\n"
                "    for _ in range(10_000):\n"
                "        print('a line of the report')\n"
                "    return 1\n"
                "run_command(main)\n",
            ],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_command_ends_with_its_own_status_and_its_output_flushed() -> None:
    done = _command("def main():\n    print('report', end='')\n    return 3\nrun_command(main)\n")
    assert (done.returncode, done.stdout, done.stderr) == (3, "report", "")
