"""Hunt for chaos scenarios that break a guarantee, and replay the ones found.

    .venv/bin/python tests/hunt_chaos.py --seed 31337 --count 600 [--off] [--out FILE]
    .venv/bin/python tests/hunt_chaos.py --replay FILE [--off]

The first draws ``--count`` scenarios with the chaos test's own generator
(``chaos_scenarios.sample``, named ``hunt-SEED``), runs each and prints, and appends to
``--out``, every one that fails (its ``repr``, then a ``#`` line with the first failures).
The second runs the scenarios in such a file again, on the code it is run with. ``--off``
turns ``confirm_publishes`` off. A seed draws the same scenarios as long as
``chaos_scenarios.draw_scenario`` is unchanged; a file of them is what stays fixed across
changes to it.
Not a test module (pytest collects ``test_*.py`` only): a hunt takes minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from chaos_scenarios import Fault, Scenario, failures, run, sample

from testnet.sim.network import NetworkModel


def _check(scenario: Scenario, out: Path | None) -> bool:
    try:
        found = failures(run(scenario))
    except Exception as error:  # a crash is a finding too
        found = [f"crashed: {error!r}"]
    if found:
        print(f"FAIL seed={scenario.seed}: {'; '.join(found[:3])[:300]}", flush=True)
        if out is not None:
            with out.open("a") as f:
                f.write(f"{scenario!r}\n#{'; '.join(found[:3])[:400]}\n")
    return bool(found)


def hunt(draw_seed: int, count: int, off: bool, out: Path | None) -> int:
    tally = {"drawn": 0, "failed": 0}
    for scenario in sample(f"hunt-{draw_seed}", count):
        if off:
            scenario = dataclasses.replace(scenario, confirm=False)
        tally["drawn"] += 1
        tally["failed"] += _check(scenario, out)
    return _report(tally)


def replay(path: Path, off: bool) -> int:
    tally = {"drawn": 0, "failed": 0}
    names = {"Scenario": Scenario, "Fault": Fault, "NetworkModel": NetworkModel}
    for line in path.read_text().splitlines():
        if line.startswith("Scenario("):
            scenario = eval(line, names)  # (our own reprs, from --out)
            if off:
                scenario = dataclasses.replace(scenario, confirm=False)
            tally["drawn"] += 1
            tally["failed"] += _check(scenario, None)
    return _report(tally)


def _report(tally: dict[str, int]) -> int:
    print(f"{tally['failed']} of {tally['drawn']} failed", flush=True)
    return 1 if tally["failed"] else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, help="seed to draw from")
    parser.add_argument("--count", type=int, default=300, help="scenarios to draw")
    parser.add_argument("--replay", type=Path, help="a file of scenarios to run again")
    parser.add_argument("--off", action="store_true", help="confirm_publishes off")
    parser.add_argument("--out", type=Path, help="append failing scenarios here")
    args = parser.parse_args(argv)
    if (args.seed is None) == (args.replay is None):
        parser.error("give exactly one of --seed and --replay")
    if args.replay is not None:
        return replay(args.replay, args.off)
    if args.count < 1:
        parser.error("--count must be at least 1")
    started = time.monotonic()
    code = hunt(args.seed, args.count, args.off, args.out)
    print(f"({time.monotonic() - started:.0f} s)")
    return code


if __name__ == "__main__":
    sys.exit(main())
