"""Locations on the circular keyspace [0, 1) and the distance between them.

Theory of operation: every node and every stream key has a *location*, a float in [0, 1) that is
read as a point on a circle of circumference 1. Routing is greedy in the circular distance
``min(|a - b|, 1 - |a - b|)``, so 0.99 and 0.01 are neighbours at distance 0.02.

Invariants:

* Every location handed out by this module is a finite float with ``0 <= v < 1``; values coming
  from outside (configuration, the wire) go through :func:`check_location` first.
* ``distance`` is symmetric, ``0 <= distance(a, b) <= 0.5`` and ``distance(a, a) == 0``.
* Comparisons between candidates never end in a tie: :func:`closeness` breaks equal distances by
  node id, so two runs with the same inputs always make the same routing choice.
"""

from __future__ import annotations

import math

# The key-to-location mapping reads this many leading bytes of the key as an unsigned integer.
# 64 bits is more resolution than a float's 53-bit mantissa can hold, so every bit that can
# influence the location is used and no more.
LOCATION_KEY_BYTES = 8

_KEY_SPACE = float(2 ** (8 * LOCATION_KEY_BYTES))

# The largest float below 1.0. Dividing a 64-bit integer by 2**64 rounds to nearest, so the top
# 2**10 integers would round up to exactly 1.0 -- outside [0, 1). They are clamped here instead.
_LARGEST_LOCATION = math.nextafter(1.0, 0.0)


def distance(a: float, b: float) -> float:
    """Circular distance between two locations: the shorter way round the circle.

    The result is in [0, 0.5]. Inputs are assumed to be valid locations; they are not checked
    here because this is the innermost function of every routing decision.
    """
    d = abs(a - b)
    return min(d, 1.0 - d)


def key_location(key: bytes) -> float:
    """Location of a key: its first 8 bytes as a big-endian fraction of 2**64.

    The key is a SHA-256 digest, so its leading bytes are uniform and so are the locations.
    The result is always in [0, 1): the few integers that a float division would round up to
    1.0 are mapped to the largest float below 1.0 instead.

    Raises ValueError for a key shorter than 8 bytes, which cannot carry a full location.
    """
    if len(key) < LOCATION_KEY_BYTES:
        raise ValueError(
            f"a key needs at least {LOCATION_KEY_BYTES} bytes to have a location, "
            f"got {len(key)} bytes: {key!r}"
        )
    value = int.from_bytes(key[:LOCATION_KEY_BYTES], "big") / _KEY_SPACE
    return min(value, _LARGEST_LOCATION)


def location_from_id(node_id: bytes) -> float:
    """Default location of a node that was not configured with one: derived from its id.

    Node ids are random, so ids give uniformly spread locations, and the same id always lands
    in the same place after a restart. Same mapping as :func:`key_location`.
    """
    return key_location(node_id)


def closeness(target: float, location: float, node_id: bytes) -> tuple[float, bytes]:
    """Sort key ordering candidates by closeness to ``target``, ties broken by lower node id.

    Use it as ``min(peers, key=lambda p: closeness(target, p.location, p.id))`` or to sort a
    list of peers into routing order. Two distinct nodes never compare equal, so the choice
    never depends on iteration order or on a hash seed.
    """
    return (distance(target, location), node_id)


def is_closer(target: float, a: float, b: float) -> bool:
    """True if location ``a`` is strictly closer to ``target`` than location ``b``.

    Strictness matters: routing only moves on when it makes real progress, and a node whose
    location equals ``b`` does not beat a must-beat location of ``b``.
    """
    return distance(target, a) < distance(target, b)


def check_location(value: object) -> float:
    """Validate a location from outside (configuration, the wire) and return it as a float.

    Accepts only real floats (ints and bools are refused: an integer 0 or 1 is far more likely
    a mistake than a location) that are finite and in [0, 1). Raises ValueError naming the
    offending value otherwise.
    """
    if not isinstance(value, float):
        raise ValueError(
            f"a location must be a float in [0, 1), got {type(value).__name__} {value!r}"
        )
    if not math.isfinite(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"a location must be a finite float in [0, 1), got {value!r}")
    return float(value)
