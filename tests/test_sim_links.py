"""The simulator's table of links (``testnet.sim.links``), built alone: a node's row is its
topology row until a link is added to it, and adding keeps both ends and no duplicates."""

from __future__ import annotations

from testnet.sim.links import Links


def test_rows_are_the_topologys_own_until_a_link_is_added() -> None:
    topology = ((1, 2), (0,), (0,))
    links = Links(topology)
    assert links[0] is topology[0] and links[1] is topology[1]
    links.add(0, 1)  # exists already: nothing is copied
    assert links[0] is topology[0] and links[1] is topology[1]
    links.add(1, 2)
    assert links[0] is topology[0]
    assert set(links[1]) == {0, 2} and set(links[2]) == {0, 1}


def test_a_new_node_has_no_links_until_one_is_added_at_both_ends() -> None:
    links = Links(((1,), (0,)))
    new = links.add_node()
    assert (new, len(links), tuple(links[new])) == (2, 3, ())
    links.add(new, 0)
    links.add(new, 0)
    assert sorted(links[new]) == [0] and sorted(links[0]) == [1, 2]
