"""What the live web view costs a testnet's workers, and how fast its page draws.

    python -m testnet.bench.web_view [--nodes 1000] [--subscribers 100] [--rate 20]
                                     [--window 20] [--repeats 2] [--seed 0]

Method. ``launcher.up`` starts ``--nodes`` real nodes in a temporary folder. For the whole
run, a trio loop on a thread of this process keeps ``--subscribers`` clients on distinct
random nodes subscribed to one open stream, and one client publishing to it at ``--rate``
packets a second. Windows of ``--window`` seconds alternate, ``--repeats`` of each kind, so
that load from elsewhere hits each: *baseline* (testnet and workload alone), *server*
(``overlay testnet web`` running, following every worker, no page open: what watching costs
the workers) and *view* (the server and one headless Chromium page on it, which selects the
stream: the browser shares the machine's two cores with the workers).
A view window starts once the page has drawn the stream's whole tree; every window starts
``SETTLE`` seconds after its set-up, so that start-up bursts are not in it.

Per window: CPU (utime + stime from /proc/PID/stat) of the workers, the server, the browser
(chromedriver and every process below it) and this process (the workload), in % of one core;
packets delivered a second; at the page, event batches a second, snapshots (more than one:
the server cut the page off as too slow), first paint (``overlayView.firstPaintMs``, ms from
navigation start) and the last 100 drawing times (``drawMs``). The processes share the
cores: read the workers' difference beside the spread within a kind, and the load average.
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from keyspace.stream_key import StreamKey
from overlay.client.aio import Client, open_client
from overlay.core.events import Packet
from testnet import launcher
from testnet.bench.measuring import Meter
from testnet.bench.processes import BenchError
from testnet.manifest import Manifest
from testnet.traffic import percentile
from testnet.web.headless import start_chromium

STREAM = StreamKey.open("bench/web-view")
LIVE_AT = re.compile(r"live at (http://127\.0\.0\.1:\d+/#token=\S+)")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Bounds on real time, so a broken run fails instead of hanging.
SETUP_TIMEOUT = 120.0  # subscribers joined and fed; the server listening; the page drawn
STOP_TIMEOUT = 20.0
SETTLE = 3.0  # seconds before each window (see the module notes)


def _stat(pid: int | str) -> list[str]:
    """/proc/PID/stat's fields from the state on (field 3), past the command's parentheses."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of ``pid`` so far (0 if it is gone)."""
    try:
        fields = _stat(pid)
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime and stime


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it, from /proc's parent links."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            children.setdefault(int(_stat(entry)[1]), []).append(int(entry))
    found = [root]
    for pid in found:
        found.extend(children.get(pid, []))
    return found


class Workload:
    """Subscribers and a publisher on a trio loop in a thread of its own, from ``start`` to
    ``stop``; ``sent`` counts publishes, ``received`` packets at each subscriber, and
    ``error`` is what ended it."""

    def __init__(self, manifest: Manifest, subscribers: int, rate: float, seed: int) -> None:
        rng = random.Random(seed)
        self.subscribers = rng.sample(range(len(manifest.nodes)), subscribers)
        self.publisher = rng.randrange(len(manifest.nodes))  # a subscriber's node or not
        self._clients = [manifest.nodes[i].client for i in [self.publisher, *self.subscribers]]
        self._rate = rate
        self.received = [0] * subscribers
        self.sent = 0
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._scope = trio.CancelScope()
        self._token: trio.lowlevel.TrioToken | None = None
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
        except BaseException as error:  # raised in the main thread by ``start`` or ``measure``
            self.error = error
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        with self._scope, trio.fail_after(SETUP_TIMEOUT) as setup:
            async with trio.open_nursery() as nursery:
                for k, address in enumerate(self._clients[1:]):
                    await nursery.start(self._subscriber, k, address)
                nursery.start_soon(self._publisher)
                while not all(self.received):  # every subscriber fed once: the tree is whole
                    await trio.sleep(0.1)
                setup.deadline = math.inf
                self._ready.set()

    async def _subscriber(self, k: int, address: str, task_status: trio.TaskStatus[None]) -> None:
        async with (
            open_client(address, name="bench web_view") as client,
            await client.subscribe(STREAM) as events,
        ):
            task_status.started()
            async for event in events:
                if isinstance(event, Packet):
                    self.received[k] += 1

    async def _publisher(self) -> None:
        async with (
            open_client(self._clients[0], name="bench web_view") as client,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(self._collect, client)
            start = trio.current_time()
            while True:
                # Paced from the start, and answers collected apart: neither a slow moment
                # nor a slow tree lowers the rate.
                await trio.sleep_until(start + self.sent / self._rate)
                client.publish_nowait(STREAM, b"%d" % self.sent)
                self.sent += 1

    async def _collect(self, client: Client) -> None:
        while True:  # ten times a second, so that the answers do not pile up
            await client.flush()
            await trio.sleep(0.1)


@dataclass
class View:
    server: subprocess.Popen[bytes]
    driver: Any  # selenium's Chrome WebDriver, or None: the server alone, no page open

    def browser(self) -> list[int]:
        return [] if self.driver is None else process_tree(self.driver.service.process.pid)

    def page(self) -> dict[str, Any]:
        if self.driver is None:
            return {}
        return dict(self.driver.execute_script("return window.overlayView"))


@contextlib.contextmanager
def viewing(directory: Path, subscribers: int, page: bool) -> Iterator[View]:
    """``overlay testnet web`` and (with ``page``) one Chromium page on it that has drawn
    the stream's whole tree; on leaving, the browser quits and the server is interrupted as
    by Ctrl-C."""
    from selenium.webdriver.support.ui import WebDriverWait

    out = directory / "web.out"
    command = [sys.executable, "-m", "tools.cli", "testnet", "web", "--dir", str(directory)]
    with out.open("wb") as log:
        server = subprocess.Popen([*command, "--port", "0"], stdout=log, stderr=log)
    driver: Any = None
    pids: list[int] = []  # the browser's, also taken early: Ctrl-C may end chromedriver first
    try:
        deadline = time.monotonic() + SETUP_TIMEOUT
        while not (found := LIVE_AT.search(out.read_text())):
            if server.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"overlay testnet web did not start: {out.read_text()}")
            time.sleep(0.1)
        if not page:
            yield View(server, None)
            return
        driver = start_chromium()
        view = View(server, driver)
        driver.get(found[1])
        WebDriverWait(driver, SETUP_TIMEOUT, poll_frequency=0.1).until(
            lambda _: (tree := view.page()["tree"]) and tree["members"] >= subscribers
        )
        pids = view.browser()
        yield view
    finally:
        if driver is not None:
            pids += process_tree(driver.service.process.pid)
            try:
                driver.quit()
            except Exception:  # (chromedriver gone, say): its browser must not outlive us
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
        server.send_signal(signal.SIGINT)
        try:
            server.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if said := out.read_text().splitlines()[2:]:  # past "live at" and its note
            say("overlay testnet web said:\n  " + "\n  ".join(said))


@dataclass
class Window:
    kind: str
    cpu: dict[str, float]  # part -> % of one core
    sent: float  # publishes a second
    delivered: float  # packets a second at all subscribers
    page: dict[str, Any] = field(default_factory=dict)  # overlayView, events made a rate


def measure(seconds: float, manifest: Manifest, workload: Workload, view: View | None) -> Window:
    """One window: each part's CPU and the workload's deliveries over ``seconds``."""
    parts = {"workers": [w.pid for w in manifest.workers], "bench": [os.getpid()]}
    if view is not None:
        parts |= {"server": [view.server.pid]}
        if view.driver is not None:
            parts["browser"] = view.browser()
    before = {pid: cpu_seconds(pid) for pids in parts.values() for pid in pids}
    sent, received = workload.sent, sum(workload.received)
    events = view.page().get("events", 0) if view else 0
    meter = Meter(profile=False)
    meter.start()
    time.sleep(seconds)
    wall = meter.stop()["elapsed"]
    if workload.error is not None:
        raise BenchError(f"the workload stopped: {workload.error!r}")
    page: dict[str, Any] = {}
    if view is not None and view.driver is not None:
        parts["browser"] = view.browser()  # its renderers may come and go
        page = view.page()
        page["events"] = (page["events"] - events) / wall
    cpu = {
        part: 100 * sum(cpu_seconds(pid) - before.get(pid, 0.0) for pid in pids) / wall
        for part, pids in parts.items()
    }
    rates = (workload.sent - sent) / wall, (sum(workload.received) - received) / wall
    kind = "baseline" if view is None else "view" if view.driver is not None else "server"
    return Window(kind, cpu, *rates, page)


# Decimals shown in each column of the report: tenths where a column's values are small.
DIGITS = (1, 1, 1, 1, 1, 0, 1, 0, 0, 1, 1, 1)


def report(windows: list[Window], args: argparse.Namespace, load: list[Any]) -> str:
    columns = "workers server browser bench sent/s deliv/s events/s snaps paint draw-p50 p95 max"
    lines = [
        f"Web view cost: {args.nodes} nodes, {args.subscribers} subscribers, one publisher "
        f"at {args.rate:g}/s (deliveries due: {args.rate * args.subscribers:g}/s), windows of "
        f"{args.window:g} s; CPU in % of one core",
        "",
        f"{'window':<9}" + "".join(f"{c:>9}" for c in columns.split()),
    ]
    for w in windows:
        draws, p = w.page.get("drawMs", []), w.page
        cells = [w.cpu.get(part, math.nan) for part in ("workers", "server", "browser", "bench")]
        cells += [w.sent, w.delivered, p.get("events", math.nan), p.get("snapshots", math.nan)]
        cells += [p.get("firstPaintMs", math.nan), *(percentile(draws, q) for q in (50, 95, 100))]
        row = zip(cells, DIGITS, strict=True)
        lines.append(f"{w.kind:<9}" + "".join(f"{c:>9.{d}f}" for c, d in row))
    kinds = ("baseline", "server", "view")
    workers = {k: statistics.mean(w.cpu["workers"] for w in windows if w.kind == k) for k in kinds}
    # On a saturated machine a cost shows as fewer deliveries as much as more CPU: the
    # workers' CPU per delivery accounts for both.
    per = {
        k: statistics.mean(w.cpu["workers"] * 10 / w.delivered for w in windows if w.kind == k)
        for k in kinds
    }
    lines = [line.replace("nan", "  -") for line in lines]  # "-": not measured
    return "\n".join(
        [
            *lines,
            "",
            "workers, mean % of a core: "
            + ", ".join(f"{k} {workers[k]:.1f}" for k in kinds)
            + f"; the watch (server - baseline) {workers['server'] - workers['baseline']:+.1f},"
            f" with a page open {workers['view'] - workers['baseline']:+.1f}",
            "workers' CPU seconds per 1,000 deliveries: "
            + ", ".join(f"{k} {per[k]:.3f}" for k in kinds),
            "paint: ms from navigation start to the first drawing; draw: ms, the last 100",
            f"load average before {' '.join(f'{x:.2f}' for x in load[0])}, after "
            f"{' '.join(f'{x:.2f}' for x in load[1])} ({os.cpu_count()} CPUs)",
        ]
    )


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> str:
    """Up, the workload, the windows, down (whatever happens); the report."""
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
            say(f"workload: publisher on node {workload.publisher}, subscribers fed")
            for _ in range(args.repeats):
                time.sleep(SETTLE)
                windows.append(measure(args.window, manifest, workload, None))
                for page in (False, True):
                    with viewing(directory, args.subscribers, page) as view:
                        time.sleep(SETTLE)
                        windows.append(measure(args.window, manifest, workload, view))
                say(f"windows done: {len(windows)} of {3 * args.repeats}")
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
