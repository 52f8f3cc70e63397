"""A node process's garbage collector: the youngest threshold raised, startup frozen, the
rest kept; run in a child process, so this one's collector is left as it is."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import gc
from overlay.runtime.collector import YOUNG_THRESHOLD, tune_for_nodes
gc.set_threshold(700, 7, 9)
tune_for_nodes()
assert gc.get_threshold() == (YOUNG_THRESHOLD, 7, 9), gc.get_threshold()
assert gc.get_freeze_count() > 1000, gc.get_freeze_count()  # (the modules loaded so far)
gc.set_threshold(10 * YOUNG_THRESHOLD, 7, 9)
tune_for_nodes()  # (a higher threshold the program chose is kept)
assert gc.get_threshold() == (10 * YOUNG_THRESHOLD, 7, 9), gc.get_threshold()
print("tuned")
"""


def test_tuning_raises_the_youngest_threshold_and_freezes_what_is_loaded() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout == "tuned\n", done.stderr
