"""The keyspace: pure math shared by the node, the simulator and the tools. No I/O, no clocks.

* :mod:`keyspace.location` -- locations on the circle [0, 1), distance, key -> location.
* :mod:`keyspace.stream_key` -- open and signed stream keys, addresses, packet signatures.
* :mod:`keyspace.topology` -- seeded Kleinberg small-world graphs and greedy routing over them.
* :mod:`keyspace.swapping` -- Freenet's location swapping (Metropolis-Hastings).

Every function that needs randomness takes a ``random.Random``, so each result is a pure
function of its seed.
"""

from keyspace.location import (
    check_location,
    closeness,
    distance,
    is_closer,
    key_location,
    location_from_id,
)
from keyspace.stream_key import (
    StreamAddressError,
    StreamKey,
    sign_packet,
    signing_payload,
    verify_packet,
)
from keyspace.swapping import swap_gain, swap_step
from keyspace.topology import (
    DegreeStats,
    Topology,
    closest_node,
    greedy_route,
    small_world,
)

__all__ = [
    "DegreeStats",
    "StreamAddressError",
    "StreamKey",
    "Topology",
    "check_location",
    "closeness",
    "closest_node",
    "distance",
    "greedy_route",
    "is_closer",
    "key_location",
    "location_from_id",
    "sign_packet",
    "signing_payload",
    "small_world",
    "swap_gain",
    "swap_step",
    "verify_packet",
]
