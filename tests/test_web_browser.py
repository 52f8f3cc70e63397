"""``overlay testnet web`` in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``; ``.ci/run`` installs them) driven by Selenium, against a testnet of
real worker processes and the real command. Each step saves a screenshot under
``tests/artifacts/web/`` (or ``$OVERLAY_TEST_ARTIFACTS/web``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_processes import OVERLAY, Lines, overlay
from selenium.webdriver.support.ui import Select

from keyspace.stream_key import StreamKey
from testnet.manifest import read_manifest
from testnet.web.headless import start_chromium

NODES = 40
WAIT = 30.0  # seconds a page may take to show what a step expects

ARTIFACTS = Path(os.environ.get("OVERLAY_TEST_ARTIFACTS", Path(__file__).parent / "artifacts"))


@pytest.fixture
def browser() -> Iterator[Any]:
    driver = start_chromium()
    try:
        yield driver
    finally:
        driver.quit()


def _until(driver: Any, what: str, condition: Callable[[], Any]) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, WAIT, poll_frequency=0.1).until(lambda _: condition())
    except Exception as error:
        shot = _shot(driver, "failed")
        raise AssertionError(f"the page never showed {what} (see {shot})") from error


def _shot(driver: Any, name: str) -> Path:
    folder = ARTIFACTS / "web"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def _text(driver: Any, element: str) -> str:
    return str(driver.find_element("id", element).text)


def _fill(driver: Any, element: str, value: str) -> None:
    field = driver.find_element("id", element)
    field.clear()
    field.send_keys(value)


# The ring's plain nodes are drawn in this colour (app.js COLORS.node): a ring with N nodes
# on it has pixels of it; a blank or failed canvas has none.
COUNT_NODE_PIXELS = """
const canvas = document.getElementById('ring');
const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
let n = 0;
for (let i = 0; i < data.length; i += 4)
  if (data[i] === 0x87 && data[i + 1] === 0x92 && data[i + 2] === 0xa2 && data[i + 3] > 200) n++;
return n;
"""


@pytest.mark.slow
def test_the_page_shows_the_ring_a_tree_and_its_repair_after_the_root_is_killed(
    testnet_dir: Path, browser: Any
) -> None:
    d = ["--dir", str(testnet_dir)]
    up = overlay("testnet", "up", "--nodes", str(NODES), "--processes", "2", *d)
    assert up.returncode == 0, up.stderr
    server = subprocess.Popen(
        [*OVERLAY, "testnet", "web", "--port", "0", *d],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = Lines(server.stdout).wait_for(r"live at (http://127\.0\.0\.1:\d+/#token=\S+)")[1]  # type: ignore[arg-type]

        # 1. The ring: every node, alive, drawn.
        browser.get(url)
        _until(browser, "all nodes", lambda: _text(browser, "stat-nodes") == str(NODES))
        _until(browser, "a live event stream", lambda: _text(browser, "connection") == "live")
        assert _text(browser, "stat-alive") == str(NODES)
        assert browser.execute_script("return window.overlayView.firstPaintMs") is not None
        assert browser.execute_script(COUNT_NODE_PIXELS) > NODES * 10
        _shot(browser, "1-ring")

        # 2. Subscribers started from the page make one tree, rooted once.
        def subscribe(stream: str, count: int) -> None:
            _fill(browser, "stream-name", stream)
            _fill(browser, "subscribe-count", str(count))
            browser.find_element("id", "subscribe").click()
            _until(
                browser,
                "the command line",
                lambda: f"overlay subscribe {stream}" in _text(browser, "command"),
            )

        subscribe("web-demo", 12)

        def one_tree(at_least: int) -> bool:
            tree = browser.execute_script("return window.overlayView.tree")
            return (
                tree is not None
                and len(tree["roots"]) == 1
                and tree["members"] >= at_least
                and not tree["detached"]
            )

        _until(browser, "a tree of 12 subscribers with one root", lambda: one_tree(12))
        demo_members = int(_text(browser, "tree-members"))

        # A second stream: the page shows the newest stream it started; picking the first
        # in the stream list draws that one's tree again.
        subscribe("web-other", 3)
        _until(
            browser,
            "the second stream's tree",
            lambda: one_tree(3) and int(_text(browser, "tree-members")) < demo_members,
        )
        other_members = int(_text(browser, "tree-members"))
        picker = Select(browser.find_element("id", "stream-select"))
        assert sorted(o.text.split()[0] for o in picker.options) == ["web-demo", "web-other"]
        picker.select_by_visible_text(next(o.text for o in picker.options if "web-demo" in o.text))
        _until(
            browser,
            "the first stream's tree again",
            # (Not its first count again: while searches settle, relays join and leave it.)
            lambda: one_tree(12) and int(_text(browser, "tree-members")) > other_members,
        )
        _fill(browser, "stream-name", "web-demo")

        # 3. A publisher at 10 a second: the packets reach the members.
        _fill(browser, "publish-rate", "10")
        browser.find_element("id", "publish").click()
        _until(browser, "a publish rate", lambda: float(_text(browser, "tree-rate")) > 0)
        _until(
            browser,
            "packets at the members",
            lambda: browser.execute_script(
                "const rows = [...document.querySelectorAll('#members tbody tr')];"
                "return rows.length >= 12 && rows.every(r => Number(r.children[4].textContent) > 5)"
            ),
        )
        _shot(browser, "2-tree")

        # 4. The root killed from the page: it greys out and the tree repairs around it.
        root = int(_text(browser, "tree-root"))
        browser.find_element("id", "kill-root").click()
        _until(browser, "the dead root", lambda: _text(browser, "stat-dead") == "1")
        _until(browser, "a new root", lambda: _text(browser, "tree-root") not in ("-", str(root)))
        _until(browser, "one repaired tree", lambda: one_tree(11))
        new_root = int(_text(browser, "tree-root"))
        log = _text(browser, "events")
        assert f"node {root} died" in log and f"kill {root}" in _text(browser, "command")
        _until(
            browser,
            "packets past the kill at every member",
            lambda: browser.execute_script(
                "const rows = [...document.querySelectorAll('#members tbody tr')];"
                "return rows.length >= 11 && rows.every(r => r.children[5].textContent !== ''"
                " && Number(r.children[5].textContent) < 20)"
            ),
        )
        assert browser.execute_script("return window.overlayView.events") > NODES
        _shot(browser, "3-repaired")
        killed = read_manifest(testnet_dir)  # the testnet itself agrees
        status = overlay("testnet", "status", *d)
        assert f"{NODES - 1} alive" in status.stdout, status.stdout
        assert killed.nodes[root].index == root

        # 5. Without the token, an action is refused and says why; nothing changes.
        browser.execute_script("sessionStorage.clear()")  # (the tab keeps the token)
        browser.get(url.split("#")[0])
        _until(browser, "all nodes", lambda: _text(browser, "stat-nodes") == str(NODES))
        _fill(browser, "node-input", "0")
        browser.find_element("id", "kill").click()
        _until(browser, "the refusal", lambda: "X-Overlay-Token" in _text(browser, "error"))
        assert _text(browser, "stat-dead") == "1"
        _shot(browser, "4-refused")

        # 6. One node alone, read-only: it, its peers, its part of the tree, no controls
        # (while the first view runs: the subscribers it started hold the tree).
        member = read_manifest(testnet_dir).nodes[new_root]
        one = subprocess.Popen(
            [*OVERLAY, "web", "--node", member.client, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            pattern = r"read-only, live at (http://127\.0\.0\.1:\d+/)\s"
            browser.get(Lines(one.stdout).wait_for(pattern)[1])  # type: ignore[arg-type]
            _until(browser, "the node and its peers", lambda: int(_text(browser, "stat-nodes")) > 1)
            assert browser.find_element("id", "read-only").is_displayed()
            assert not browser.find_element("id", "controls").is_displayed()
            assert f"the node at {member.client}" in _text(browser, "read-only")
            # The node is the stream's root: its children hang below it.
            demo = StreamKey.parse("web-demo").key.hex()
            _until(browser, "the stream in the list", lambda: demo in browser.page_source)
            Select(browser.find_element("id", "stream-select")).select_by_value(demo)
            _until(browser, "the node's tree", lambda: _text(browser, "tree-root") == "0")
            _until(browser, "its children", lambda: int(_text(browser, "tree-members")) > 1)
            _shot(browser, "5-one-node")
        finally:
            one.send_signal(signal.SIGINT)
            _, one_stderr = one.communicate(timeout=20)
        assert one.returncode == 130 and "Traceback" not in one_stderr, one_stderr
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=20)
    assert server.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr


def test_web_command_mistakes_are_one_line_naming_the_fault(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        free = closed.getsockname()[1]
    cases = [
        (["web", "--node", f"127.0.0.1:{free}", "--port", "0"], 1, "cannot connect to a node"),
        (["web", "--node", "nowhere"], 2, "--node"),
        (["testnet", "web", "--dir", str(tmp_path)], 2, "no testnet running"),
        (["testnet", "web", "--host", "0.0.0.0", "--dir", str(tmp_path)], 2, "loopback"),
        (["testnet", "web", "--port", "70000"], 2, "--port: must be from 0 to 65535"),
    ]
    for args, status, reason in cases:
        result = overlay(*args)
        assert result.returncode == status, (args, result.stderr)
        assert reason in result.stderr.strip().splitlines()[-1], (args, result.stderr)
        assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_port_in_use_is_said_in_one_line(testnet_dir: Path) -> None:
    up = overlay("testnet", "up", "--nodes", "4", "--dir", str(testnet_dir))
    assert up.returncode == 0, up.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        result = overlay("testnet", "web", "--dir", str(testnet_dir), "--port", str(taken))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "in use" in result.stderr, result.stderr
