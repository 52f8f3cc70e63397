"""Refusals: every peer or client the node refuses or cuts off, counted by reason and logged.

The rule (README, "Links, and what a misbehaving peer gets"): a refused or cut-off peer is
one WARNING line with the reason and the peer's address or id, so an operator sees it at the
default log level. A flood must not fill the disk, so lines are rate-limited per reason: at
most ``LINES_PER_INTERVAL`` lines of one reason in ``INTERVAL`` seconds; the rest of that
interval is counted and not logged, and the first line of that reason after it says how
many went unlogged. Counting is never limited: ``overlay stats`` shows every reason's count.

A reason names a category (a stable key for counting), never the peer's own words; the line
carries the details.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("overlay.refusals")

# Ten lines a minute per reason: enough to see who and why during an attack, few enough
# that a flood of a million connections writes about a kilobyte a minute per reason.
LINES_PER_INTERVAL = 10
INTERVAL = 60.0


class Refusal(enum.StrEnum):
    """Why a peer or client was refused or cut off; the value is its ``overlay stats`` key."""

    HANDSHAKE = "handshake"  # an incoming connection failed or timed out its handshake
    # max_handshakes: an older one made room, or a flood's silent newcomer was refused
    HANDSHAKES_FULL = "handshakes_full"
    ADDRESS_FULL = "address_full"  # max_handshakes_per_address: refused at accept
    LINKS_FULL = "links_full"  # max_links: an authenticated newcomer refused
    CLIENTS_FULL = "clients_full"  # max_clients: a local client refused
    QUEUES_FULL = "queues_full"  # max_queued_bytes: the fullest queue's reader cut off
    SLOW_PEER = "slow_peer"  # a link's send queue passed send_queue_bytes
    SLOW_CLIENT = "slow_client"  # a client's queue passed client_queue_bytes
    PEER_PROTOCOL = "peer_protocol"  # a frame too large, unauthentic, or not a message
    PEER_DROPPED = "peer_dropped"  # the protocol cut the peer off (forged, before Hello...)
    LOCATION = "location"  # a Hello claiming a location its id does not give (``vouching``)
    ID_WORK = "id_work"  # an unvouched peer whose id carries too little work (``vouching``)
    VOUCH = "vouch"  # a Hello's or a neighbour's vouch that does not verify
    CLIENT_PROTOCOL = "client_protocol"  # a malformed request, one before Hello, ...
    COOLDOWN = "cooldown"  # cut off for a fault and back too soon (``cooldown``)


@dataclass(slots=True)
class _Window:
    started: float
    logged: int = 0
    unlogged: int = 0


class Refusals:
    """Counts refusals by reason and logs them as rate-limited warnings (module notes).
    ``clock``: seconds, monotonic (the node's trio clock)."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        lines: int = LINES_PER_INTERVAL,
        interval: float = INTERVAL,
        logger: logging.Logger = log,
    ) -> None:
        self._clock = clock
        self._lines = lines
        self._interval = interval
        self._log = logger
        self.counts: dict[str, int] = {}
        self._windows: dict[Refusal, _Window] = {}

    def __call__(self, reason: Refusal, who: str, detail: str) -> None:
        """Count one refusal of ``who`` (an address or a node id) and log it unless this
        reason has had its lines for the current interval."""
        self.counts[reason.value] = self.counts.get(reason.value, 0) + 1
        now = self._clock()
        window = self._windows.get(reason)
        if window is None or now - window.started >= self._interval:
            if window is not None and window.unlogged:
                self._log.warning(
                    "%d more refusals (%s) in the %.0f s from %.0f s ago were not logged",
                    window.unlogged,
                    reason.value,
                    self._interval,
                    now - window.started,
                )
            window = self._windows[reason] = _Window(now)
        if window.logged >= self._lines:
            window.unlogged += 1
            return
        window.logged += 1
        self._log.warning("refused %s (%s): %s", who, reason.value, detail)
