"""Fixtures shared by the test modules."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testnet.launcher import worker_alive
from testnet.manifest import ManifestError, read_manifest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def testnet_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder for a testnet, which is always taken down at the end (and its workers
    killed if ``down`` fails)."""
    directory = tmp_path / "testnet"
    yield directory
    try:
        manifest = read_manifest(directory)
    except ManifestError:
        return
    subprocess.run(
        [sys.executable, "-m", "tools.cli", "testnet", "down", "--dir", str(directory)],
        capture_output=True,
        timeout=120,
        cwd=ROOT,
    )
    for worker in manifest.workers:  # down failed: no worker may outlive the test
        if worker_alive(worker.pid):
            os.kill(worker.pid, signal.SIGKILL)
