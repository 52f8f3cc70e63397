"""``python -m testnet.sim.chaos_cli``: publish on many streams, kill a share of the nodes
(every root first) while publishing, and report losses, duplicates, trees and repair times.

Example: python -m testnet.sim.chaos_cli --nodes 10000 --streams 100 --subscribers 100
"""

from __future__ import annotations

import argparse
import json

from overlay.core.config import NodeConfig
from testnet.arguments import positive
from testnet.sim.__main__ import _fraction, add_proximity
from testnet.sim.chaos import ChaosExperiment, ChaosPlan, run_chaos
from testnet.sim.collector import collector_paused, run_command
from testnet.sim.simulator import SimConfig
from testnet.sim.workload import PublishLoad

SUMMARY = """\
{nodes} nodes, seed {seed}: {streams} streams x {per_stream} subscribers; killed {killed} \
({silent_text}), restarted {restarted}, added {added}
  heartbeat             every {heartbeat:g} s, a peer dead after {dead_after:g} s of silence
  acknowledged packets  {packets_acked}
  surviving subscribers {subscribers_alive}: {deliveries}/{deliveries_expected} deliveries
  lost                  {lost} acknowledged packets a live subscriber was owed and never \
given nor told it missed
  restarted clients     {clients_resubscribed}/{clients_restarted} subscribed again with \
their last_seen; {missed_announced} packets announced missed to them
  duplicates            {duplicates_delivered};  delivery problems {delivery_problem_count}
  trees                 {streams_one_tree}/{streams} streams one healthy tree; \
at most {max_roots} roots a stream
  invariant violations  {violation_count}
  repair                {repaired}/{streams} streams; p50 {repair_p50:.1f} s \
({p50_beats:.1f} heartbeats), p90 {repair_p90:.1f} s, max {repair_max:.1f} s
  work                  {restarts} restarts, {dead_peers} peers declared dead, \
{pushed_up} packets pushed up, {refilled} refilled, {publish_retries} publish retries
  messages              {messages} sent ({past_queries} PastQuery), {claims_refused} claims refused
  wall time             {wall:.1f} s ({virtual_time:.0f} virtual s)"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testnet.sim.chaos_cli", description=__doc__)
    p.add_argument("--nodes", type=positive, default=1000, help="network size (1000)")
    p.add_argument("--streams", type=positive, default=20, help="streams (20)")
    p.add_argument("--subscribers", type=positive, default=20, help="per stream (20)")
    p.add_argument("--seed", type=int, default=1, help="seed (1)")
    add_proximity(p)
    p.add_argument("--kill", type=_fraction, default=0.2, help="share of nodes killed (0.2)")
    p.add_argument("--loud", action="store_true", help="peers learn of a death at once")
    p.add_argument("--restart-after", type=float, default=None, help="restart the killed")
    p.add_argument("--add", type=int, default=0, help="nodes joining at the kill (0)")
    p.add_argument("--packets", type=positive, default=60, help="per stream (60)")
    p.add_argument("--rate", type=float, default=2.0, help="packets a second a stream (2)")
    p.add_argument("--heartbeat", type=float, default=5.0, help="heartbeat interval (5)")
    p.add_argument(
        "--confirm-publishes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="roots send a packet down only once its publisher's node confirms its number "
        "(the default; --no-confirm-publishes: at once, at half the latency)",
    )
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    args = p.parse_args(argv)
    if args.subscribers > args.nodes:
        p.error(f"--subscribers {args.subscribers} exceeds --nodes {args.nodes}")
    try:
        node = NodeConfig(
            heartbeat_interval=args.heartbeat,
            dead_after=3 * args.heartbeat,
            takeover_grace=2 * args.heartbeat,
            confirm_publishes=args.confirm_publishes,
        )
        exp = ChaosExperiment(
            SimConfig(nodes=args.nodes, seed=args.seed, proximity=args.proximity, node=node),
            streams=args.streams,
            subscribers=args.subscribers,
            publish=PublishLoad(packets=args.packets, rate=args.rate, start=15.0),
            plan=ChaosPlan(
                kill_fraction=args.kill,
                silent=not args.loud,
                restart_after=args.restart_after,
                add_nodes=args.add,
            ),
        )
    except ValueError as error:
        p.error(str(error))
    with collector_paused():
        _, report = run_chaos(exp)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        beats = float(report["repair_p50"]) / args.heartbeat  # type: ignore[arg-type]
        silent_text = "silently" if report["silent"] else "loudly"
        print(SUMMARY.format(**report, p50_beats=beats, silent_text=silent_text))
    healthy = report["lost"] == 0 and report["duplicates_delivered"] == 0
    return 0 if healthy and report["violation_count"] == 0 else 1


if __name__ == "__main__":
    run_command(main)
