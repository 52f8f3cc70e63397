"""Errors say who is at fault (h11's rule).

``RemoteProtocolError``: a peer or client sent something invalid; the driver drops that peer
or answers that client, and nothing else is disturbed. ``LocalProtocolError``: our own code
asked for something impossible; it is a bug to fix, never a peer's doing.
"""

from __future__ import annotations


class RemoteProtocolError(ValueError):
    """Invalid input from the other side of a link or a client connection."""


class LocalProtocolError(RuntimeError):
    """Our own code broke a rule of the protocol or of the core's API."""
