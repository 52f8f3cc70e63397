"""What the live web view costs a testnet's workers, and how fast its page draws.

    python -m testnet.bench.web_view [--nodes 1000] [--subscribers 100] [--rate 20]
                                     [--window 20] [--repeats 2] [--seed 0]

Method. ``testnet.launcher.up`` starts ``--nodes`` real nodes in worker processes in a
temporary folder. For the whole run, a trio loop on a thread of this process keeps a steady
workload going: ``--subscribers`` clients on distinct random nodes subscribe to one open
stream, and one client on another node publishes to it at ``--rate`` packets a second, paced
from the start as ``testnet.web.activity`` paces. Windows of ``--window`` seconds then
alternate, ``--repeats`` times each, so that load from elsewhere hits both kinds alike:

* baseline: the testnet and the workload alone;
* view: ``overlay testnet web`` running, and one headless Chromium page open on it (the
  flags of tests/test_web_browser.py) showing the stream (the page selects the first one).

A view window starts once the page has drawn the stream's tree with every subscriber in it,
and ``SETTLE`` seconds later (a worker's first look and the page's snapshot are start-up,
not the steady cost); every window is preceded by the same settling.

Per window: CPU seconds (utime + stime, /proc/PID/stat) of the workers, of the web server,
of the browser (chromedriver and every process below it) and of this process (the workload),
each as a percentage of the window's wall time (100% = one core); packets the subscribers
received a second; and, from the page, event batches a second and snapshots (more than one:
the server cut the page off as too slow and it reconnected). From each page: time to first
paint (``overlayView.firstPaintMs``: ms from navigation start to the first drawing of a
snapshot) and its last 100 drawings (``drawMs``) at the end of the window.

Caveats. Every process shares the machine's cores: when they are all busy, the view's cost
shows partly as the others' slowdown. Compare the worker difference with the spread between
windows of one kind, and read the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from keyspace.stream_key import StreamKey
from overlay.client.aio import open_client
from overlay.core.events import Packet
from testnet import launcher
from testnet.bench.measuring import Meter
from testnet.bench.processes import BenchError
from testnet.manifest import Manifest

STREAM = StreamKey.open("bench/web-view")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# As root in a sandbox with no network: no sandboxing, no GPU, none of Chromium's own
# connections (as tests/test_web_browser.py).
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1600,1000",
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Bounds on real time, so a broken run fails instead of hanging.
SETUP_TIMEOUT = 120.0  # subscribers joined and fed, the server listening, the page drawn
STOP_TIMEOUT = 20.0
PORT = ("--port", "0")  # any free port: the server prints which
SETTLE = 3.0  # seconds before each window: start-up bursts pass, the previous view ends


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of ``pid`` so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14 and 15 of stat(5)


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it, from /proc's parent links."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                children.setdefault(int(stat[1]), []).append(int(entry))
    found = [root]
    for pid in found:
        found.extend(children.get(pid, []))
    return found


class Workload:
    """Subscribers and a publisher on a trio loop in a thread of its own, from ``start``
    to ``stop``; ``received`` counts packets at every subscriber."""

    def __init__(self, manifest: Manifest, subscribers: int, rate: float, seed: int) -> None:
        rng = random.Random(seed)
        self.subscribers = rng.sample(range(len(manifest.nodes)), subscribers)
        self.publisher = rng.randrange(len(manifest.nodes))  # a subscriber's node or not
        chosen = [self.publisher, *self.subscribers]
        self._addresses = [manifest.nodes[i].client for i in chosen]
        self._rate = rate
        self.received = [0] * subscribers
        self._ready = threading.Event()
        self._scope = trio.CancelScope()
        self._token: trio.lowlevel.TrioToken | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(SETUP_TIMEOUT) or self.error is not None:
            raise BenchError(f"the workload did not start: {self.error or 'timed out'}")

    def stop(self) -> None:
        if self._token is not None and self._thread.is_alive():
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
        self._thread.join(STOP_TIMEOUT)

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as error:  # reported by ``start`` or by the window after
            self.error = error
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        with self._scope, trio.fail_after(SETUP_TIMEOUT) as setup:
            async with trio.open_nursery() as nursery:
                for k, address in enumerate(self._addresses[1:]):
                    await nursery.start(self._subscriber, k, address)
                nursery.start_soon(self._publisher)
                while not all(self.received):  # every subscriber fed once: the tree exists
                    await trio.sleep(0.1)
                setup.deadline = math.inf
                self._ready.set()

    async def _subscriber(
        self, k: int, address: str, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with (
            open_client(address, name="bench web_view") as client,
            await client.subscribe(STREAM) as events,
        ):
            task_status.started()
            async for event in events:
                if isinstance(event, Packet):
                    self.received[k] += 1

    async def _publisher(self) -> None:
        async with open_client(self._addresses[0], name="bench web_view") as client:
            batch = max(1, int(self._rate / 10))  # answers collected ten times a second
            start, sent = trio.current_time(), 0
            while True:
                # Paced from the start: a slow moment is caught up, not a lower rate.
                await trio.sleep_until(start + sent / self._rate)
                client.publish_nowait(STREAM, b"%d" % sent)
                sent += 1
                if sent % batch == 0:
                    await client.flush()


@dataclass
class View:
    """``overlay testnet web`` and one Chromium page on it."""

    server: subprocess.Popen[bytes]
    driver: Any  # selenium's Chrome WebDriver
    first_paint_ms: float = math.nan

    def browser_pids(self) -> list[int]:
        return process_tree(self.driver.service.process.pid)

    def page(self) -> dict[str, Any]:
        return dict(self.driver.execute_script("return window.overlayView"))


def open_view(directory: Path, subscribers: int) -> View:
    """Start the server, open the page, and wait until it draws the stream's whole tree."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    out = directory / "web.out"
    with out.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "tools.cli", "testnet", "web", "--dir", str(directory), *PORT],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    view = View(server, None)
    deadline = time.monotonic() + SETUP_TIMEOUT
    while not (
        found := re.search(r"live at (http://127\.0\.0\.1:\d+/#token=\S+)", out.read_text())
    ):
        if server.poll() is not None or time.monotonic() > deadline:
            close_view(view)
            raise BenchError(f"overlay testnet web did not start: {out.read_text()}")
        time.sleep(0.1)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    try:
        view.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        view.driver.get(found[1])
        WebDriverWait(view.driver, SETUP_TIMEOUT, poll_frequency=0.1).until(
            lambda _: (tree := view.page()["tree"]) and tree["members"] >= subscribers
        )
    except BaseException:
        close_view(view)
        raise
    view.first_paint_ms = float(view.page()["firstPaintMs"])
    return view


def close_view(view: View) -> None:
    """Quit the browser (its leftovers killed by pid) and interrupt the server, as Ctrl-C."""
    if view.driver is not None:
        pids = view.browser_pids()
        try:
            view.driver.quit()
        except Exception:  # (chromedriver gone, say): its browser must not outlive the run
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    view.server.send_signal(signal.SIGINT)
    try:
        view.server.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        view.server.kill()
        view.server.wait()


@dataclass
class Window:
    kind: str
    cpu: dict[str, float] = field(default_factory=dict)  # percent of one core, per part
    delivered: float = 0.0  # packets a second, all subscribers
    page_events: float = math.nan  # event batches a second at the page
    snapshots: int = 0
    draw_ms: list[float] = field(default_factory=list)
    first_paint_ms: float = math.nan


def measure(seconds: float, manifest: Manifest, workload: Workload, view: View | None) -> Window:
    """One window: every part's CPU and the workload's deliveries over ``seconds``."""
    parts = {"workers": [w.pid for w in manifest.workers], "bench": [os.getpid()]}
    if view is not None:
        parts |= {"server": [view.server.pid], "browser": view.browser_pids()}
    before = {pid: cpu_seconds(pid) for pids in parts.values() for pid in pids}
    received, events = sum(workload.received), view.page()["events"] if view else 0
    meter = Meter(profile=False)
    meter.start()
    time.sleep(seconds)
    wall = meter.stop()["elapsed"]
    if workload.error is not None:
        raise BenchError(f"the workload stopped: {workload.error!r}")
    window = Window(
        "view" if view else "baseline", delivered=(sum(workload.received) - received) / wall
    )
    if view is not None:
        parts["browser"] = view.browser_pids()  # renderers may come and go
        page = view.page()
        window.page_events = (page["events"] - events) / wall
        window.snapshots, window.draw_ms = page["snapshots"], page["drawMs"]
        window.first_paint_ms = view.first_paint_ms
    for part, pids in parts.items():
        used = sum(cpu_seconds(pid) - before.get(pid, 0.0) for pid in pids)
        window.cpu[part] = 100 * used / wall
    return window


def quantile(values: list[float], q: float) -> float:
    """Nearest rank; NaN for no values."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else math.nan


def report(
    windows: list[Window], args: argparse.Namespace, load: list[tuple[float, float, float]]
) -> str:
    head = f"{'window':<10}{'workers':>9}{'server':>8}{'browser':>9}{'bench':>7}"
    head += f"{'pkts/s':>8}{'page ev/s':>10}{'snaps':>6}{'paint':>8}"
    head += f"{'draw p50':>9}{'p95':>7}{'max':>7}"
    lines = [
        f"Web view cost: {args.nodes} nodes, {args.subscribers} subscribers, one publisher "
        f"at {args.rate:g}/s, windows of {args.window:g} s; CPU in % of one core",
        "",
        head,
    ]
    for w in windows:
        c = w.cpu
        line = f"{w.kind:<10}{c['workers']:>9.1f}{c.get('server', math.nan):>8.1f}"
        line += f"{c.get('browser', math.nan):>9.1f}{c['bench']:>7.1f}{w.delivered:>8.0f}"
        line += f"{w.page_events:>10.1f}{w.snapshots:>6}{w.first_paint_ms:>8.0f}"
        line += "".join(
            f"{quantile(w.draw_ms, q):>{n}.1f}" for q, n in ((0.5, 9), (0.95, 7), (1, 7))
        )
        lines.append(line)
    base = statistics.mean(w.cpu["workers"] for w in windows if w.kind == "baseline")
    viewed = statistics.mean(w.cpu["workers"] for w in windows if w.kind == "view")
    lines += [
        "",
        f"workers: baseline {base:.1f}%, view {viewed:.1f}%, difference {viewed - base:+.1f}% "
        f"of a core ({(viewed - base) / base * 100:+.0f}%)",
        "paint: first paint, ms from navigation start; draw: ms, the page's last 100 drawings",
        f"load average before {load[0][0]:.2f} {load[0][1]:.2f} {load[0][2]:.2f}, "
        f"after {load[1][0]:.2f} {load[1][1]:.2f} {load[1][2]:.2f} ({os.cpu_count()} CPUs)",
    ]
    return "\n".join(lines)


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> str:
    load = [os.getloadavg()]
    directory = Path(tempfile.mkdtemp(prefix="bench-web-view-"))
    windows: list[Window] = []
    try:
        manifest = launcher.up(
            args.nodes, directory, seed=args.seed, keep_state=False, progress=say
        )
        workload = Workload(manifest, args.subscribers, args.rate, args.seed)
        try:
            workload.start()
            say(f"workload: publisher on node {workload.publisher}, {args.subscribers} subscribers")
            for _ in range(args.repeats):
                time.sleep(SETTLE)
                windows.append(measure(args.window, manifest, workload, None))
                view = open_view(directory, args.subscribers)
                try:
                    time.sleep(SETTLE)
                    windows.append(measure(args.window, manifest, workload, view))
                finally:
                    close_view(view)
                say(f"done: {windows[-2].kind}, {windows[-1].kind}")
            load.append(os.getloadavg())
        finally:
            workload.stop()
            launcher.down(directory, progress=lambda _: None)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return report(windows, args, load)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testnet.bench.web_view",
        description="The CPU the live web view costs a testnet's workers, and its page's "
        "first paint and drawing times, beside windows without the view.",
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--subscribers", type=int, default=100)
    parser.add_argument("--rate", type=float, default=20.0, help="packets a second")
    parser.add_argument("--window", type=float, default=20.0, help="seconds per window")
    parser.add_argument("--repeats", type=int, default=2, help="windows of each kind")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 1 <= args.subscribers <= args.nodes or args.rate <= 0 or args.window <= 0:
        parser.error("need 1 <= --subscribers <= --nodes, and --rate and --window above 0")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    try:
        print(run(args))
    except KeyboardInterrupt:
        print("interrupted: the testnet, the view and the browser are stopped", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
