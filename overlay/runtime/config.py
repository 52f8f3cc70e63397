"""A real node's configuration: the TOML file ``overlay node --config`` reads, with defaults.

Every setting has a default that starts a working node (an identity file next to the config,
peers on 0.0.0.0:7701, clients on 127.0.0.1:7702, open mode, no peers to dial), so an empty
file or none at all is a valid configuration. Every problem (unknown key, wrong type,
bad address, bad identity in the trust list) is a ``ConfigError`` that names the file, the
key and what is wrong, never a stack trace.

A location is taken from a peer only if its node id gives it, or if the peer is one the
operator vouches for by listing it in ``trusted`` (``overlay.runtime.vouching``). So a node
configured with a ``location`` of its own needs a ``trusted`` list: it is one of an
operator's own nodes, which list each other; without one, every peer would refuse its
Hello, and a node that starts only to have each link refused is worse than one that does
not start (``RuntimeConfig`` refuses the combination with a ``ConfigError``).

    [node]
    identity = "node.key"          # Ed25519 identity, created on first start
    state = "node.state"           # streams' newest packet numbers, kept across restarts
                                   # (default: the identity's name, .state; "": none)
    location = 0.25                # optional, needs `trusted`; default: from the node id
                                   # (in listed trust, where its swaps left it wins:
                                   # <state>.location, overlay.runtime.location_file)
    network = "overlay"            # nodes link only within the same network name
    listen = "0.0.0.0:7701"        # where peers connect
    client = "127.0.0.1:7702"      # where local scripts connect (keep it on loopback)

    [peers]
    connect = ["127.0.0.1:7711", "10.0.0.5:7701@<node id>"]
    trust = "open"                 # or "listed": accept only the ids in `trusted`
    trusted = ["<node id>"]        # ids vouched for: their Hello may claim any location
    identity_work = 12             # bits of work an unvouched peer's id must carry; also
                                   # what a new identity of this node is made with

    [limits]                       # any field of overlay.core.config.NodeConfig, and
    heartbeat_interval = 5.0       # the runtime's bounds (RUNTIME_LIMITS)
    max_links = 256
    [runtime]
    send_queue_bytes = 16777216    # per link; a peer that reads slower is disconnected
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keyspace.id_work import DEFAULT_ID_WORK, MAX_ID_WORK
from overlay.core.config import NodeConfig
from overlay.runtime.identity import IdentityError, parse_node_id
from overlay.runtime.link import DEFAULT_MAX_QUEUE_BYTES

DEFAULT_PEER_PORT = 7701
DEFAULT_CLIENT_PORT = 7702


class ConfigError(ValueError):
    """A configuration that cannot be used; the message says where and why."""


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(text: str, *, default_host: str | None = None) -> Address:
    """``host:port`` (``[v6]:port`` for IPv6); ``:port`` or a bare port takes
    ``default_host`` if one is given. Raises ConfigError naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"bad address {text!r}: expected host:port")
    text = text.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ConfigError(f"bad address {text!r}: expected [ipv6]:port")
        port_text = rest[1:]
    elif ":" in text:
        host, _, port_text = text.rpartition(":")
    elif text.isdigit() and default_host is not None:
        host, port_text = "", text
    else:
        raise ConfigError(f"bad address {text!r}: expected host:port")
    if not host:
        if default_host is None:
            raise ConfigError(f"bad address {text!r}: no host")
        host = default_host
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"bad address {text!r}: port must be a number in 0..65535")
    return Address(host, int(port_text))


@dataclass(frozen=True, slots=True)
class PeerAddress:
    """A peer to dial; ``node_id``, if given, is the identity it must prove."""

    address: Address
    node_id: bytes | None = None


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    identity: Path = Path("node.key")
    # The state file (``overlay.runtime.state_file``): ``state``, or, if None, the identity's
    # path with the suffix ".state". Only if ``keep_state``: a node built in code (a
    # testnet's, a test's) keeps nothing on disk unless told to; ``load_config`` (``overlay
    # node``) turns it on unless the file says ``state = ""``.
    keep_state: bool = False
    state: Path | None = None
    location: float | None = None
    network: str = "overlay"
    listen: Address = Address("0.0.0.0", DEFAULT_PEER_PORT)
    client: Address = Address("127.0.0.1", DEFAULT_CLIENT_PORT)
    connect: tuple[PeerAddress, ...] = ()
    trust_listed: bool = False
    trusted: frozenset[bytes] = frozenset()
    # Bits of work (``keyspace.id_work``) an unvouched peer's node id must carry, and that
    # this node's identity is made with when it has none: each bit doubles the cost of
    # grinding an id near a chosen key, and an honest node pays it once.
    identity_work: int = DEFAULT_ID_WORK
    core: NodeConfig = field(default_factory=NodeConfig)
    send_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES
    handshake_timeout: float = 10.0  # a peer that has not authenticated by then is cut off
    reconnect_min: float = 0.5  # first redial delay; doubles up to reconnect_max
    reconnect_max: float = 30.0
    client_queue_bytes: int = 64 * 1024 * 1024  # per client; a slower reader is cut off
    # Per-node bounds (``[limits]``; README, "Links, and what a misbehaving peer gets").
    # Connections not yet authenticated: a handshake takes a round trip and a millisecond
    # of work, so an honest node has a few at a time (a restarted neighbourhood dialling
    # back); 256 of them pin about 256 x 5 KiB. Past it, the oldest is cut to make room:
    # under a flood the handshake timeout shrinks instead of the door closing.
    max_handshakes: int = 256
    # Of those, from one IP address: refused at accept. Generous for a host running a
    # testnet's many nodes or a NAT, far below what one attacking address would hold.
    max_handshakes_per_address: int = 32
    # Authenticated links accepted from peers (links this node dials are its own choice):
    # a Freenet-style node keeps tens; each may queue send_queue_bytes.
    max_links: int = 256
    # Local client connections: a Spark job's executors, tools and scripts.
    max_clients: int = 256
    # Every link's and client's queue together (``overlay.runtime.budget``): beyond it, the
    # reader holding the most is cut off. Eight full client queues or 32 full link queues,
    # far above what a healthy node queues (about 1 MiB a link under load, Known limits).
    max_queued_bytes: int = 512 * 1024 * 1024
    # Peers remembered for a cooldown after a fault (``overlay.runtime.cooldown``), and a
    # quarter as many source addresses: an attacker making fresh ids outnumbers any table,
    # so this bounds memory (about 200 bytes a record), not how many are kept out.
    max_cooldowns: int = 4096

    def __post_init__(self) -> None:
        if self.core.swap_interval > 0 and not self.trust_listed:
            raise ConfigError(
                f"[limits] swap_interval = {self.core.swap_interval} needs [peers] trust = "
                f'"listed": a node that swaps takes other locations than its id gives, which '
                f"only peers that vouch for it accept; in open trust every peer would refuse "
                f"its links after its first swap"
            )
        if self.location is not None and not self.trusted:
            raise ConfigError(
                f"[node] location = {self.location} needs [peers] trusted: a peer takes a "
                f"location other than the one a node's id gives only from a node it vouches "
                f"for, so every peer would refuse this node's links. Leave location out (the "
                f"node then sits where its id puts it), or run it among the operator's own "
                f"nodes, each listing the others' ids in [peers] trusted"
            )

    @property
    def state_file(self) -> Path | None:
        """Where this node keeps its state file, if it keeps one."""
        if not self.keep_state:
            return None
        return self.state if self.state is not None else self.identity.with_suffix(".state")


# The ``[limits]`` keys that are the runtime's, not the core's (``NodeConfig``): counts and
# byte totals a node holds at once, each a positive integer.
RUNTIME_LIMITS = frozenset(
    {
        "max_handshakes",
        "max_handshakes_per_address",
        "max_links",
        "max_clients",
        "max_queued_bytes",
        "max_cooldowns",
    }
)
_CORE_LIMITS = frozenset(f.name for f in dataclasses.fields(NodeConfig))
assert not RUNTIME_LIMITS & _CORE_LIMITS, "a [limits] key must name one setting"

_SECTIONS = {
    "node": {"identity", "state", "location", "network", "listen", "client"},
    "peers": {"connect", "trust", "trusted", "identity_work"},
    "limits": _CORE_LIMITS | RUNTIME_LIMITS,
    "runtime": {
        "send_queue_bytes",
        "handshake_timeout",
        "reconnect_min",
        "reconnect_max",
        "client_queue_bytes",
    },
}


def load_config(path: Path | None) -> RuntimeConfig:
    """Read ``path`` (None: every default). Relative paths in it are relative to its folder."""
    if path is None:
        return RuntimeConfig(keep_state=True)
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: {error}") from None
    try:
        return config_from_dict(data, base=path.parent, keep_state=True)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None


def config_from_dict(
    data: Mapping[str, Any], *, base: Path = Path("."), keep_state: bool = False
) -> RuntimeConfig:
    """Build a config from already parsed TOML (the testnet launcher writes these);
    ``keep_state``: whether there is a state file unless ``[node] state`` says."""
    for section, values in data.items():
        if section not in _SECTIONS:
            raise ConfigError(f"unknown section [{section}] (known: {', '.join(_SECTIONS)})")
        if not isinstance(values, Mapping):
            raise ConfigError(f"[{section}] must be a table")
        for key in values:
            if key not in _SECTIONS[section]:
                raise ConfigError(f"unknown key {key!r} in [{section}]")
    node = data.get("node", {})
    peers = data.get("peers", {})
    kwargs: dict[str, Any] = {}
    if "identity" in node:
        kwargs["identity"] = base / _typed(node, "identity", str, "node")
    kwargs["keep_state"] = keep_state
    if "state" in node:
        named = _typed(node, "state", str, "node")
        kwargs["keep_state"] = bool(named)
        kwargs["state"] = base / named if named else None
    if "location" in node:
        location = _typed(node, "location", float, "node")
        if not 0.0 <= location < 1.0:
            raise ConfigError(f"[node] location must be in [0, 1), got {location}")
        kwargs["location"] = location
    if "network" in node:
        kwargs["network"] = _typed(node, "network", str, "node")
    if "listen" in node:
        kwargs["listen"] = parse_address(
            _typed(node, "listen", str, "node"), default_host="0.0.0.0"
        )
    if "client" in node:
        kwargs["client"] = parse_address(
            _typed(node, "client", str, "node"), default_host="127.0.0.1"
        )
    if "connect" in peers:
        kwargs["connect"] = tuple(parse_peer(p) for p in _typed(peers, "connect", list, "peers"))
    if "trust" in peers:
        trust = _typed(peers, "trust", str, "peers")
        if trust not in ("open", "listed"):
            raise ConfigError(f'[peers] trust must be "open" or "listed", got {trust!r}')
        kwargs["trust_listed"] = trust == "listed"
    if "trusted" in peers:
        kwargs["trusted"] = frozenset(
            _node_id(t, "[peers] trusted") for t in _typed(peers, "trusted", list, "peers")
        )
    if "identity_work" in peers:
        work = _typed(peers, "identity_work", int, "peers")
        if not 0 <= work <= MAX_ID_WORK:
            raise ConfigError(
                f"[peers] identity_work must be in [0, {MAX_ID_WORK}] bits, got {work}"
            )
        kwargs["identity_work"] = work
    limits = dict(data.get("limits", {}))
    for key in RUNTIME_LIMITS & limits.keys():
        value = limits.pop(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"[limits] {key} must be a positive integer, got {value!r}")
        kwargs[key] = value
    limits = {key: _like_default(key, value) for key, value in limits.items()}
    try:
        kwargs["core"] = NodeConfig(**limits)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"[limits] {error}") from None
    for key, value in data.get("runtime", {}).items():
        whole = key.endswith("_bytes")  # (a byte count has no fraction)
        wanted = int if whole else int | float
        if isinstance(value, bool) or not isinstance(value, wanted) or value <= 0:
            kind = "a positive integer" if whole else "a positive number"
            raise ConfigError(f"[runtime] {key} must be {kind}, got {value!r}")
        kwargs[key] = int(value) if whole else float(value)
    return RuntimeConfig(**kwargs)


def parse_peer(text: object) -> PeerAddress:
    """``host:port`` or ``host:port@<node id>``."""
    if not isinstance(text, str):
        raise ConfigError(f"[peers] connect entries must be strings, got {text!r}")
    address, sep, node_id = text.partition("@")
    return PeerAddress(
        parse_address(address), _node_id(node_id, "[peers] connect") if sep else None
    )


def _like_default(key: str, value: object) -> object:
    """``value`` for the core's ``key``, of the type of its default (an integer where a
    float is wanted becomes one). A ConfigError naming the key otherwise: NodeConfig's own
    range checks would fail on a string with a message about ``<`` that names nothing."""
    default = getattr(_CORE_DEFAULTS, key, None)
    if default is None:
        return value  # (an optional setting; NodeConfig checks it)
    kind = type(default)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ConfigError(f"[limits] {key} must be {_KIND_NAMES[kind]}, got {value!r}")
    return value


_CORE_DEFAULTS = NodeConfig()
_KIND_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _node_id(text: object, where: str) -> bytes:
    if not isinstance(text, str):
        raise ConfigError(f"{where}: node ids are strings, got {text!r}")
    try:
        return parse_node_id(text)
    except IdentityError as error:
        raise ConfigError(f"{where}: {error}") from None


def _typed(table: Mapping[str, Any], key: str, kind: type, section: str) -> Any:
    value = table[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ConfigError(f"[{section}] {key} must be a {kind.__name__}, got {value!r}")
    return value
