"""Cycles in a dependency map (node -> the nodes it depends on), the two ways they are told:
one closed path for a refusal (`find_cycle`: a batch of nodes that cannot be added) and every
cycle's members for plan lint (`cycle_members`: one finding per cycle). Pure functions."""

from __future__ import annotations


def find_cycle(edges: dict[str, list[str]]) -> list[str] | None:
    """A dependency cycle among `edges` (node → deps) as a path ending where it began, or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    for root in edges:
        if state.get(root):
            continue
        path, stack = [root], [iter(edges.get(root, ()))]
        state[root] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(step) == 1:
                return [*path[path.index(step):], step]
            elif not state.get(step) and step in edges:
                state[step] = 1
                path.append(step)
                stack.append(iter(edges[step]))
    return None


def cycle_members(depends: dict[str, list[str]]) -> list[list[str]]:
    """The nodes of each cycle (a strongly connected component of more than one node, or a
    node depending on itself), in plan order; Tarjan's algorithm without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in depends:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, edge = work.pop()
            if edge == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            deps = [dep for dep in depends[node] if dep in depends]
            if edge < len(deps):
                work.append((node, edge + 1))
                dep = deps[edge]
                if dep not in index:
                    work.append((dep, 0))
                elif dep in on_stack:
                    low[node] = min(low[node], index[dep])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in depends[node]:
                    components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    order = {node: position for position, node in enumerate(depends)}
    return sorted((sorted(component, key=order.__getitem__) for component in components),
                  key=lambda component: order[component[0]])
