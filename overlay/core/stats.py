"""Counters one node keeps about its own work, for `overlay stats` and the simulator."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(slots=True)
class NodeStats:
    received: int = 0  # messages handled (a Bundle counts once)
    sent: int = 0  # messages sent
    searches: int = 0  # searches routed through (or started at) this node
    forwarded: int = 0  # search hops sent, backtracking included
    loops: int = 0  # RejectedLoop sent
    uids_refused: int = 0  # searches whose uid named another stream's search here (loops)
    overloads: int = 0  # RejectOverload sent
    catch_ups_refused: int = 0  # searches refused for their sender's catch-up budget
    not_found: int = 0  # searches that ended here without a tree
    timeouts: int = 0  # forwarded searches whose peer never answered
    roots: int = 0  # times this node became a root
    restarts: int = 0  # subscriptions restarted after losing a parent
    confirm_timeouts: int = 0  # restarts routed before the whole subtree confirmed
    dead_peers: int = 0  # peers dropped for silence (no heartbeat within dead_after)
    ignored: int = 0  # messages with nothing to do here
    published: int = 0  # packets this node ordered as a root
    batches: int = 0  # local batches a root numbered in one pass (``batches``)
    numbered: int = 0  # of those, new publishes it gave a number of its own (not pushed)
    delivered: int = 0  # events delivered to local clients about packets
    stored: int = 0  # packets this node took into its window (once each)
    duplicates: int = 0  # packets received again (0 on a healthy tree: link stress 1)
    gaps: int = 0  # ranges of packets found missing and reported as such
    forged: int = 0  # packets refused for a bad signature
    publish_rejected: int = 0  # publishes refused (PublishRejected sent or refusal decided)
    uids_reused: int = 0  # fresh publishes under a uid the root gave other content (refused)
    publish_retries: int = 0  # local publishes sent again after a timeout
    pushed_up: int = 0  # packets sent up to a new parent that had not processed them
    pushes_resent: int = 0  # pushes sent again, unanswered after publish_timeout
    claims_refused: int = 0  # a root: publishers' claims beyond its head, published afresh
    claims_renewed: int = 0  # a publisher's node: claims refused, so published afresh
    witnesses: int = 0  # a relay: confirmations passed up whose publish it kept (witnesses)
    swap_attempts: int = 0  # location swaps this node started (``swaps``)
    swaps: int = 0  # swaps this node was an end of that were decided yes
    swaps_rejected: int = 0  # swaps this node started that a node on the walk refused
    swaps_refused: int = 0  # swap requests this node refused (loop, busy, full, not swapping)
    swaps_withdrawn: int = 0  # swaps this node left before revealing: it joined a tree
    swap_halves: int = 0  # swaps decided yes whose partner moved while this node could not
    swap_walks: int = 0  # swap walks this node relayed
    swap_timeouts: int = 0  # swaps this node was an end of that never finished
    swap_cheats: int = 0  # peers cut off for a swap reveal that broke its commitment
    witness_claims: int = 0  # a relay: witness claims pushed up, or weighed as a new root
    peer_witnesses_sent: int = 0  # a publisher's node: PublishWitness sent (peer_witnesses)
    peer_witnesses: int = 0  # PublishWitness kept as a witness claim (peer_witnesses)
    refilled: int = 0  # packets a root took back from a child after taking over
    backfilled: int = 0  # packets from before a takeover a root took to catch a child up
    looks: int = 0  # times this node, root after a takeover, looked for another tree
    probes: int = 0  # RootProbes this node sent as a root (``probes``)
    splits_found: int = 0  # a closer root answered a probe, or its probe or look crossed us
    looks_crossed: int = 0  # a closer origin's look crossed this root's: the next followed it
    probes_rerouted: int = 0  # probes waiting on a peer that went away: backtracked past it
    lost_looks: int = 0  # looks whose search vanished without an answer: ended as not found
    merges: int = 0  # times such a look found one and this node's tree joined it
    commit_timeouts: int = 0  # a root's HeldQuery no child answered: its clients shown anyway
    held_queries: int = 0  # HeldQuery sent to children (one per child per question: commits)
    commit_notices: int = 0  # Committed sent to children: how far they may show (showing)
    held_back: int = 0  # a root: new publishes held while its window was all uncommitted
    held_up: int = 0  # local publishes that waited for their stream's credit (``credit``)
    filled: int = 0  # packets from before we joined, asked of our parent for a child
    past_queries: int = 0  # PastQuery sent down: a root's lacks after a takeover (gathering)
    confirmed: int = 0  # confirmations a root took for pending publishes (confirming)
    unconfirmed: int = 0  # numbered publishes dropped unconfirmed at a root (confirming)
    # Peers' publishes a root sent down unconfirmed: past confirm_deadline, or from a child
    # not waited for after a lapse (confirming)
    released_unconfirmed: int = 0
    lapses: int = 0  # children's numbers that lapsed: not waited for a while (confirm_lapses)
    # Children that fell silent holding the oldest pending number and did not answer a
    # question while later packets waited: it and those behind were set aside (confirming)
    silent_drops: int = 0
    # Pending numbers a root gave up on and set aside, never to give to another publish
    # (confirming: its child fell silent or left, or its confirmation never came)
    set_aside: int = 0
    resolved: int = 0  # numbers set aside that went down once a publish showed the side live
    # Numbers set aside that went down, the lowest, on a claim, push or late confirmation
    # naming them with their packet (confirming)
    claimed_back: int = 0
    renewed: int = 0  # peers' dropped pending numbers a root told their nodes to publish afresh

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
