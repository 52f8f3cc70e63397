"""The client library of a node's client port: ``overlay.client.aio`` (trio) and
``overlay.client.blocking`` (plain sockets), two drivers of one sans-IO connection
(``overlay.client.connection``) speaking one wire protocol (``overlay.client.protocol``).

Streams are named by an ``ovl:`` address, a ``keyspace.stream_key.StreamKey``, or, to publish
on a signed stream, a ``SignedStream`` (the stream with its private key: the client signs).
"""

from overlay.client.aio import Client as AsyncClient
from overlay.client.aio import Subscription, connect, open_client
from overlay.client.blocking import BlockingSubscription, Client
from overlay.client.connection import (
    BadNodeAddress,
    ClientClosed,
    ClientConnection,
    ClientError,
    ClientTimeout,
    NodeUnreachable,
    NotAClientPort,
    PublishCollisionError,
    PublishRejectedError,
    SignedStream,
    StreamEvent,
    StreamLike,
    SubscribeFailedError,
    SubscriptionOverflow,
)
from overlay.client.protocol import ClientProtocolError

__all__ = [
    "AsyncClient",
    "BadNodeAddress",
    "BlockingSubscription",
    "Client",
    "ClientClosed",
    "ClientConnection",
    "ClientError",
    "ClientProtocolError",
    "ClientTimeout",
    "NodeUnreachable",
    "NotAClientPort",
    "PublishCollisionError",
    "PublishRejectedError",
    "SignedStream",
    "StreamEvent",
    "StreamLike",
    "SubscribeFailedError",
    "Subscription",
    "SubscriptionOverflow",
    "connect",
    "open_client",
]
