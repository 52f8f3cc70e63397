"""Reading a test's end of a socket without waiting."""

from __future__ import annotations

import socket


def waiting_bytes(sock: socket.socket) -> bytes:
    """Everything on ``sock`` already, read without waiting (up to the end of the stream,
    if the other side closed)."""
    data = b""
    while True:
        try:
            chunk = sock.recv(1 << 20, socket.MSG_DONTWAIT)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return data
