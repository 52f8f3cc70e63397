"""The tree checker over plain (node -> parent, children, root) maps: each kind of breakage."""

from __future__ import annotations

from testnet.tree_check import Member, check_tree, summary


def tree(**members: tuple[str | None, str, bool]) -> dict[str, Member[str]]:
    """``name=(parent, "children letters", root)``."""
    return {n: Member(p, tuple(c), r) for n, (p, c, r) in members.items()}


def test_healthy_tree_has_depths_and_no_problems() -> None:
    check = check_tree(
        tree(a=(None, "bc", True), b=("a", "d", False), c=("a", "", False), d=("b", "", False))
    )
    assert check.ok
    assert check.roots == ["a"]
    assert check.depth == {"a": 0, "b": 1, "c": 1, "d": 2}
    assert check.height == 2
    assert not check.cut_off


def test_two_roots_are_reported() -> None:
    check = check_tree(tree(a=(None, "b", True), b=("a", "", False), x=(None, "", True)))
    assert summary(check.problems)["roots"] == 1
    assert set(check.problems[0].nodes) == {"a", "x"}
    assert "2 roots" in check.problems[0].text


def test_no_root_is_reported() -> None:
    check = check_tree(tree(a=("b", "b", False), b=("a", "a", False)))
    kinds = summary(check.problems)
    assert kinds["roots"] == 1
    assert kinds["cycle"] == 1
    assert check.cut_off == {"a", "b"}


def test_cycle_is_reported_once_with_its_path() -> None:
    members = tree(
        r=(None, "", True), a=("c", "b", False), b=("a", "c", False), c=("b", "a", False)
    )
    check = check_tree(members)
    cycles = [p for p in check.problems if p.kind == "cycle"]
    assert len(cycles) == 1
    assert set(cycles[0].nodes) == {"a", "b", "c"}
    assert "->" in cycles[0].text
    assert check.cut_off == {"a", "b", "c"}


def test_orphan_whose_parent_does_not_carry_or_did_not_answer() -> None:
    members = tree(r=(None, "", True), a=("gone", "b", False), b=("a", "", False))
    check = check_tree(members)
    orphans = [p for p in check.problems if p.kind == "orphan"]
    assert [p.nodes for p in orphans] == [("a",)]
    assert "does not carry" in orphans[0].text
    assert check.cut_off == {"a", "b"}  # the whole subtree is cut off
    check = check_tree(members, unreachable={"gone"})
    assert "did not answer" in check.problems[0].text


def test_disagreements_both_ways() -> None:
    # b names a as parent but a does not list b; a lists c, whose parent is r.
    members = tree(
        r=(None, "ac", True), a=("r", "c", False), b=("a", "", False), c=("r", "", False)
    )
    check = check_tree(members)
    texts = [p.text for p in check.problems if p.kind == "disagreement"]
    assert any("b names a as its parent, but a does not list it" in t for t in texts)
    assert any("a lists c as a child, but c has parent r" in t for t in texts)
    assert summary(check.problems)["disagreement"] == 2


def test_listed_child_that_does_not_carry_the_stream() -> None:
    check = check_tree(tree(r=(None, "z", True)))
    assert [p.kind for p in check.problems] == ["disagreement"]
    assert "does not carry" in check.problems[0].text


def test_member_without_parent_that_is_not_root_is_detached() -> None:
    check = check_tree(tree(r=(None, "", True), a=(None, "", False)))
    assert [p.kind for p in check.problems] == ["detached"]
    assert check.cut_off == {"a"}  # it does not reach the root either


def test_labels_name_nodes_in_messages() -> None:
    check = check_tree(
        {1: Member(None, (), True), 2: Member(None, (), True)}, label=lambda n: f"node {n}"
    )
    assert "node 1, node 2" in check.problems[0].text


def test_empty_stream_is_fine() -> None:
    assert check_tree({}).ok


def test_a_root_farther_from_the_key_than_a_node_that_answered_is_a_warning() -> None:
    """A tree rooted at b while c, which answered too, is closer to the key: the spec roots
    a tree at the closest node, so a farther root that stays is a routing failure or a
    peer that claimed a location it does not hold."""
    members = tree(a=("b", "", False), b=(None, "a", True))
    distances = {"a": 0.3, "b": 0.2, "c": 0.01}
    check = check_tree(members, distances=distances)
    assert check.ok  # the tree is whole: a warning, not a problem
    assert summary(check.warnings)["far_root"] == 1 and len(check.warnings) == 1
    assert check.warnings[0].nodes == ("b", "c")
    assert "closer" in check.warnings[0].text
    assert not check_tree(members, distances={"a": 0.3, "b": 0.2}).warnings  # b is closest
    assert not check_tree(members, distances={"a": 0.3, "b": 0.2, "c": 0.2}).warnings  # a tie
