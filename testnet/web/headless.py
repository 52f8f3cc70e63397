"""Headless Chromium for the web view's browser test and benchmark, driven by Selenium.

Debian's ``chromium`` and ``chromium-driver`` packages (``apt-get install chromium
chromium-driver``; ``.ci/run`` installs them) at their fixed paths: Selenium is never left
to find or fetch a browser or a driver itself, which this machine's closed network would
refuse. Selenium comes with the ``test`` extra.
"""

from __future__ import annotations

import shutil
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

# As root in a sandbox with no network: no sandboxing, no GPU, none of Chromium's own
# connections (updates, sync), which would be refused at every start, and no shared memory
# from /dev/shm, which a container keeps too small for pages.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def start_chromium(width: int = 1600, height: int = 1000) -> Any:
    """A Selenium ``WebDriver`` on a new headless Chromium; the caller quits it.
    RuntimeError, saying what to install, if the browser or its driver is missing."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if missing:
        raise RuntimeError(
            f"{', '.join(missing)} missing: apt-get install chromium chromium-driver"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--window-size={width},{height}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
