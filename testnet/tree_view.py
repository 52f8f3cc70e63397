"""Views of an assembled tree: the terminal tree, JSON, and Graphviz dot.

The terminal view draws the tree from its root down (children in location order) with each
node's location, its distance to the stream's key, its number of children and its local
subscribers (``*``); nodes the tree does not reach from a root (orphans, cycles, a second
tree) are listed after it, and every problem is named at the end and marked (``!``) on the
nodes at fault. Plain ASCII, so it survives any terminal and any log file.
"""

from __future__ import annotations

import json
from typing import Any

from testnet.tree import Tree, short_id


def render_text(tree: Tree, *, max_nodes: int = 400) -> str:
    """The tree as text; beyond ``max_nodes`` lines the rest is summarised."""
    lines = [
        f"stream {tree.stream.address}  key {tree.stream.key.hex()[:16]}  "
        f"location {tree.location:.6f}"
    ]
    at_fault = {n for p in tree.check.problems for n in p.nodes}
    shown: set[bytes] = set()
    budget = [max_nodes]

    def line(node: bytes, prefix: str, branch: str) -> None:
        if budget[0] <= 0:
            return
        budget[0] -= 1
        shown.add(node)
        lines.append(prefix + branch + _describe(tree, node, node in at_fault))

    def walk(node: bytes, prefix: str) -> None:
        children = [c for c in tree.children(node) if c not in shown]
        for i, child in enumerate(children):
            last = i == len(children) - 1
            line(child, prefix, "`-- " if last else "|-- ")
            walk(child, prefix + ("    " if last else "|   "))

    if not tree.members:
        lines.append("no node that answered carries this stream (nobody subscribed?)")
    for root in sorted(tree.check.roots, key=lambda n: tree.members[n].location):
        line(root, "", "root ")
        walk(root, "")
    rest = [n for n in tree.members if n not in shown]
    if rest and budget[0] > 0:
        lines.append("not reached from a root:")
        for node in sorted(rest, key=lambda n: tree.members[n].location):
            if node not in shown:
                line(node, "  ", "")
                walk(node, "  ")
    if budget[0] <= 0:
        lines.append(f"... ({len(tree.members) - len(shown)} more members not shown)")
    lines.append(_summary(tree))
    lines.extend(_problems(tree))
    return "\n".join(lines)


def _describe(tree: Tree, node: bytes, at_fault: bool) -> str:
    m = tree.members[node]
    text = f"{tree.label(node)}  @{m.location:.6f}  d={m.distance:.6f}"
    if m.state not in ("joined", "root"):
        text += f"  [{m.state}]"
    count = len(m.children)
    if count:
        text += f"  {count} child{'ren' if count != 1 else ''}"
    if m.subscribers:
        text += f"  * {m.subscribers} subscriber{'s' if m.subscribers != 1 else ''}"
    if m.kept:
        text += "  (kept: nobody in it)"
    if at_fault:
        text += "  !"
    return text


def _summary(tree: Tree) -> str:
    subscribers = sum(m.subscribers for m in tree.members.values())
    parts = [
        f"{len(tree.members)} members",
        f"{len(tree.check.roots)} root{'s' if len(tree.check.roots) != 1 else ''}",
        f"depth {tree.check.height}",
        f"{subscribers} subscribers on {len(tree.subscribers)} nodes (*)",
        f"{len(tree.locations)} nodes answered",
    ]
    if tree.unreachable:
        parts.append(f"{len(tree.unreachable)} did not")
    return "; ".join(parts)


def _problems(tree: Tree) -> list[str]:
    if not tree.members:
        return []
    warnings = [f"  ? {warning}" for warning in tree.check.warnings]
    if tree.check.ok and warnings:
        return ["WHOLE (one root, no cycles, no orphans), but:", *warnings]
    if tree.check.ok:
        return ["OK: one root, no cycles, no orphans, every parent agrees with its children"]
    lines = [f"PROBLEMS ({len(tree.check.problems)}), marked ! above:"]
    lines.extend(f"  ! {problem}" for problem in tree.check.problems)
    return lines + warnings


def to_json(tree: Tree) -> dict[str, Any]:
    """Plain data for scripts: every member, its depth, and every problem."""
    return {
        "stream": tree.stream.address,
        "key": tree.stream.key.hex(),
        "location": tree.location,
        "ok": tree.check.ok,
        "roots": [n.hex() for n in tree.check.roots],
        "height": tree.check.height,
        "members": [
            {
                "id": n.hex(),
                "label": tree.label(n),
                "location": m.location,
                "distance": m.distance,
                "state": m.state,
                "parent": None if m.parent is None else m.parent.hex(),
                "children": [c.hex() for c in m.children],
                "subscribers": m.subscribers,
                "depth": tree.check.depth.get(n),
                "high": m.high,
                "window": m.window,
                "kept": m.kept,
            }
            for n, m in sorted(tree.members.items(), key=lambda item: item[1].location)
        ],
        "problems": [
            {"kind": p.kind, "nodes": [n.hex() for n in p.nodes], "text": p.text}
            for p in tree.check.problems
        ],
        "warnings": [
            {"kind": p.kind, "nodes": [n.hex() for n in p.nodes], "text": p.text}
            for p in tree.check.warnings
        ],
        "unreachable": [{"address": a.address, "error": a.error} for a in tree.unreachable],
    }


def render_json(tree: Tree) -> str:
    return json.dumps(to_json(tree), indent=2)


def render_dot(tree: Tree) -> str:
    """Graphviz: edges from parent to child; the root a double circle, subscribers filled,
    nodes at fault red, edges that only one side believes in dashed red."""
    at_fault = {n for p in tree.check.problems for n in p.nodes}
    out = [
        "digraph tree {",
        f'  label="{tree.stream.address} @ {tree.location:.6f}";',
        "  node [shape=ellipse, fontsize=10];",
    ]
    for n, m in tree.members.items():
        attrs = [f'label="{tree.label(n)}\\n@{m.location:.4f} d={m.distance:.4f}"']
        if m.state == "root":
            attrs.append("shape=doublecircle")
        if m.subscribers:
            attrs.append('style=filled, fillcolor="lightblue"')
        if n in at_fault:
            attrs.append("color=red, penwidth=2")
        out.append(f'  "{short_id(n)}" [{", ".join(attrs)}];')
    for n, m in tree.members.items():
        for c in m.children:
            agreed = c in tree.members and tree.members[c].parent == n
            style = "" if agreed else " [style=dashed, color=red]"
            out.append(f'  "{short_id(n)}" -> "{short_id(c)}"{style};')
        parent = tree.members.get(m.parent) if m.parent is not None else None
        if m.parent is not None and (parent is None or n not in parent.children):
            out.append(f'  "{short_id(m.parent)}" -> "{short_id(n)}" [style=dashed, color=red];')
    out.append("}")
    return "\n".join(out)
