"""Must-beat: where a search may end, so that trees join without ever closing a cycle.

Spec, "When something changes": the node that lost its parent (the *origin*) routes a
ResubscribeRequest whose must-beat location is its own; "a node with the stream accepts it
only if it is closer to the key than must_beat and has not seen a SubscribeRestarted with
that uid", and "If we become the root, we check whether we are closer to the key than the
must-beat location, and if so, succeed; if not, fail." A plain SubscribeRequest has no
must-beat: any node carrying the stream takes it.

The rules here extend the spec's where it leaves a cycle possible (``restarts`` tells the
three races). Rule 3 is the one these checks carry: two detached subtrees could adopt each
other, so a detached member (one carrying a restart label, ``Stream.restart_origin``) takes
a resubscribe only from an origin farther from the key than its own. Subtrees then hang
below one another only in strictly decreasing distance of their origins, which no cycle
can do. An attached root is nobody's descendant and takes any resubscribe, so two trees
always become one.

Each check is a pure function of the stream record, our location and the search.
"""

from __future__ import annotations

from keyspace.location import is_closer
from overlay.core.effects import PeerId
from overlay.core.routing import Route
from overlay.core.streams import State, Stream
from overlay.messages import SubscribeSucceeded, SubscribeSucceededNewRoot


def may_become_root(route: Route, own: float) -> bool:
    """Whether the node where ``route`` ended becomes the stream's root.

    Spec, for a resubscribe: "If we become the root, we check whether we are closer to the
    key than the must-beat location, and if so, succeed; if not, fail."
    """
    if not route.i_am_best:
        return False
    return route.must_beat is None or is_closer(route.target, own, route.must_beat)


def may_accept(stream: Stream, own: float, uid: int, must_beat: float | None) -> bool:
    """Whether a search may end here. A resubscribe needs, by the spec, our location
    closer to the key than must-beat and a uid we have not relayed as a restart (it
    would come from our ancestor); every remembered restart uid counts, since an older
    restart that a newer one overtook still comes from an ancestor. A detached subtree
    takes only requests from origins farther than its own (rule 3 above); an attached
    root takes any (it has no ancestor to adopt)."""
    if must_beat is None:
        return True
    if uid in stream.restarts_seen:
        return False
    origin = stream.restart_origin
    if origin is None and stream.state is State.ROOT:
        # A root that is not detached is nobody's descendant, so adopting any subtree
        # closes no cycle: it takes the request whatever its must-beat, and the two
        # trees are one (see ``merges``). The spec's rule would send it on, and a
        # search that then finds nothing closer leaves two roots side by side.
        return True
    target = stream.target
    if not is_closer(target, own, must_beat):
        return False
    return origin is None or is_closer(target, origin, must_beat)


def label_refuses(stream: Stream, own: float, uid: int, must_beat: float | None) -> bool:
    """Whether only our label keeps us from taking a resubscribe: we are closer to the
    key than its must-beat (or a root, which takes any once its look is over) and it is
    not our ancestor's, but we are detached or looking under an origin no closer to the
    key than must-beat (rule 3 above). Then another tree of the stream is restarting or
    looking at this very moment, and the search's origin, told so (DataNotFound
    ``lost``), looks again once it may have settled (``merges``). A looking root counts
    though it is farther than must-beat: when two roots look at once, the farther one
    refuses the closer one's look only for its own label, and a plain "not found" would
    end that look while the farther root's own look may miss the closer tree, leaving
    two roots that number the same packets."""
    origin = stream.restart_origin
    return (
        must_beat is not None
        and origin is not None
        and uid not in stream.restarts_seen
        and (stream.state is State.ROOT or is_closer(stream.target, own, must_beat))
        and not is_closer(stream.target, origin, must_beat)
    )


def may_hang_below(stream: Stream, uid: int, must_beat: float | None) -> bool:
    """Whether a search we routed on, which found a tree beyond us, may be answered
    from here (joining our tree, not the one it found: we carry the stream). While we
    are detached that is rule 3 again: only a subtree whose origin is farther than ours
    may hang below us (answering regardless can close a cycle with no root). Our
    own location does not matter here: the tree that accepted it was close enough."""
    origin = stream.restart_origin
    if must_beat is None or origin is None:
        return True
    return uid not in stream.restarts_seen and is_closer(stream.target, origin, must_beat)


def may_move_to(
    stream: Stream,
    peer: PeerId,
    reply: SubscribeSucceeded | SubscribeSucceededNewRoot,
    route: Route,
) -> bool:
    """A search we routed on found, through ``peer``, a tree that is not detached, and
    our label (a detached or looking tree, farther from the key than the search's
    origin) forbids hanging the origin below us. Then we move, with our subtree, to
    the tree it found, and answer it from there. Refusing would end the search as
    "nothing found" while a tree was found (a look routed through a looking root's
    members to a third root, refused on its way back, leaves two roots that number the
    same packets). Only a member moves, and only
    below an existing, unlabelled tree: a labelled one may hang below our own tree, and
    our root still looks, so it finds the tree we moved to.

    An unlabelled answer is outside our subtree only if every member of it carried our
    label before the search left us: so our label must have been confirmed by then
    (``route.labelled``): should a member the label has not reached yet answer, the relay
    would hang below its own descendant, a cycle with no root. And never for a restart we
    relayed: its origin is our ancestor, or was (a newer restart may have moved us since),
    and it comes to hang below us: a cycle, too."""
    if stream.state is not State.JOINED or peer in stream.children:
        return False
    if route.labelled is None or route.labelled != stream.restart_uid:
        return False
    if route.uid in stream.restarts_seen:
        return False
    return isinstance(reply, SubscribeSucceeded) and reply.origin is None
