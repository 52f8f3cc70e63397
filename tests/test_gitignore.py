"""The files the README's tour creates stay out of commits: a node's private key above all."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "path", ["a.key", "sub/node.key", "a.state", "a.state.lock", "testnet-data/manifest.json"]
)
def test_files_the_tour_creates_are_ignored(path: str) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    # --no-index: the rule is what is asked about, whether or not such a file is tracked.
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT, capture_output=True
    )
    assert result.returncode == 0, f"{path} is not ignored: {result.stderr!r}"
