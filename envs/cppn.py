"""A small NEAT-style CPPN (compositional pattern-producing network), numpy only.

Enhanced POET (uber-research/poet, `poet_distributed/niches/box2d/cppn.py`) draws its
BipedalWalker ground from a CPPN evolved with neat-python. This module is a self-contained
replacement holding the genome as plain data, so it round-trips through JSON exactly.

Genome (plain data: nested dicts/lists of numbers, strings and bools)::

    {"nodes": [{"id": -1, "kind": "input",  "activation": "identity"},
               {"id": -2, "kind": "bias",   "activation": "identity"},
               {"id":  0, "kind": "output", "activation": "identity"},
               {"id":  1, "kind": "hidden", "activation": "sin"}, ...],
     "connections": [{"in": -1, "out": 0, "weight": 0.5, "enabled": true}, ...]}

* exactly one input node (fed `x`), at most one bias node (fed 1.0), exactly one output;
  input and bias nodes have no incoming connections, the output none outgoing;
* nodes are kept sorted by id, connections by (in, out); a pair (in, out) appears once;
* the graph over ALL connections (enabled or not) is acyclic (feed-forward);
* a node's value is activation(sum of weight * source value over its enabled incoming
  connections), summed in (in, out) order; evaluation visits nodes in a topological
  order whose ties are broken by the smaller node id, so results are deterministic.

Activations follow neat-python's (which the reference used): identity z; sin sin(5z);
sigmoid 1 / (1 + exp(-5z)); square z**2; tanh tanh(2.5z) (sin, sigmoid and tanh clamp
their scaled argument to [-60, 60]). Every node value is clipped to [-VALUE_LIMIT,
VALUE_LIMIT] so chained squares cannot overflow.

`mutate` follows the reference's config-cppn (single structural mutation, weight mutate
rate 0.75 with power 0.1, weights in [-10, 10], new weights N(0, 0.25)) plus the operators
the reference config left at rate 0 (add connection, change activation); a child is kept
only when valid: acyclic, the input still reaches the output through enabled connections,
finite outputs that differ from the parent's over the given x values, and an optional
caller predicate. Invalid children are redrawn (at most `max_tries`, all from the rng).
"""
from __future__ import annotations

import copy
import heapq
import math
from typing import Any, Callable

import numpy as np

ACTIVATIONS = ("identity", "sin", "sigmoid", "square", "tanh")
KINDS = ("input", "bias", "hidden", "output")
INPUT_ID, BIAS_ID, OUTPUT_ID = -1, -2, 0
WEIGHT_LIMIT = 10.0
VALUE_LIMIT = 1e6

# Mutation rates (reference config-cppn where it has them).
WEIGHT_MUTATE_RATE = 0.75
WEIGHT_MUTATE_POWER = 0.1
WEIGHT_INIT_STDEV = 0.25
# One structural mutation per call at most, drawn with these probabilities.
STRUCTURAL = (("add_node", 0.1), ("delete_node", 0.075), ("add_connection", 0.1), ("change_activation", 0.1))
MAX_TRIES = 100
DIFF_TOL = 1e-9


class GenomeError(ValueError):
    """A malformed genome; `field` names the bad part (e.g. 'nodes[2].activation')."""

    def __init__(self, field_name: str, message: str):
        self.field = field_name
        super().__init__(f"{field_name}: {message}")


# ================================================================ construction
def initial_genome(weight: float = 0.0, bias_weight: float = 0.0) -> dict[str, Any]:
    """The reference's start: input x and bias fully connected to one identity output."""
    return {
        "nodes": [
            {"id": BIAS_ID, "kind": "bias", "activation": "identity"},
            {"id": INPUT_ID, "kind": "input", "activation": "identity"},
            {"id": OUTPUT_ID, "kind": "output", "activation": "identity"},
        ],
        "connections": [
            {"in": BIAS_ID, "out": OUTPUT_ID, "weight": float(bias_weight), "enabled": True},
            {"in": INPUT_ID, "out": OUTPUT_ID, "weight": float(weight), "enabled": True},
        ],
    }


def _canonical(genome: dict[str, Any]) -> dict[str, Any]:
    nodes = sorted(genome["nodes"], key=lambda n: n["id"])
    conns = sorted(genome["connections"], key=lambda c: (c["in"], c["out"]))
    return {"nodes": nodes, "connections": conns}


# ================================================================== validation
def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def validate_genome(genome: Any) -> None:
    """Raise GenomeError naming the bad field if `genome` is malformed."""
    if not isinstance(genome, dict):
        raise GenomeError("", f"expected a dict, got {type(genome).__name__}")
    extra = set(genome) - {"nodes", "connections"}
    if extra:
        raise GenomeError(sorted(extra)[0], "unknown key")
    for key in ("nodes", "connections"):
        if key not in genome:
            raise GenomeError(key, "missing")
        if not isinstance(genome[key], list):
            raise GenomeError(key, "expected a list")
    ids: list[int] = []
    kinds: dict[int, str] = {}
    for i, node in enumerate(genome["nodes"]):
        f = f"nodes[{i}]"
        if not isinstance(node, dict) or set(node) != {"id", "kind", "activation"}:
            raise GenomeError(f, "expected a dict with keys id, kind, activation")
        if not isinstance(node["id"], int) or isinstance(node["id"], bool):
            raise GenomeError(f + ".id", f"expected an int, got {node['id']!r}")
        if node["kind"] not in KINDS:
            raise GenomeError(f + ".kind", f"unknown kind {node['kind']!r}; known: {', '.join(KINDS)}")
        if node["activation"] not in ACTIVATIONS:
            raise GenomeError(
                f + ".activation", f"unknown activation {node['activation']!r}; known: {', '.join(ACTIVATIONS)}"
            )
        if node["id"] in kinds:
            raise GenomeError(f + ".id", f"duplicate node id {node['id']}")
        fixed = {"input": INPUT_ID, "bias": BIAS_ID, "output": OUTPUT_ID}
        if node["kind"] in fixed and node["id"] != fixed[node["kind"]]:
            raise GenomeError(f + ".id", f"the {node['kind']} node must have id {fixed[node['kind']]}")
        if node["kind"] == "hidden" and node["id"] <= 0:
            raise GenomeError(f + ".id", "hidden node ids must be positive")
        if node["kind"] in ("input", "bias") and node["activation"] != "identity":
            raise GenomeError(f + ".activation", f"{node['kind']} nodes are identity")
        ids.append(node["id"])
        kinds[node["id"]] = node["kind"]
    if ids != sorted(ids):
        raise GenomeError("nodes", "nodes must be sorted by id")
    if INPUT_ID not in kinds:
        raise GenomeError("nodes", "missing the input node (id -1)")
    if OUTPUT_ID not in kinds:
        raise GenomeError("nodes", "missing the output node (id 0)")
    pairs: list[tuple[int, int]] = []
    for i, conn in enumerate(genome["connections"]):
        f = f"connections[{i}]"
        if not isinstance(conn, dict) or set(conn) != {"in", "out", "weight", "enabled"}:
            raise GenomeError(f, "expected a dict with keys in, out, weight, enabled")
        for end in ("in", "out"):
            if conn[end] not in kinds or isinstance(conn[end], bool):
                raise GenomeError(f"{f}.{end}", f"dangling connection: no node {conn[end]!r}")
        if kinds[conn["in"]] == "output":
            raise GenomeError(f + ".in", "the output node has no outgoing connections")
        if kinds[conn["out"]] in ("input", "bias"):
            raise GenomeError(f + ".out", f"{kinds[conn['out']]} nodes take no incoming connections")
        w = conn["weight"]
        if not _is_num(w) or not math.isfinite(w) or abs(w) > WEIGHT_LIMIT:
            raise GenomeError(f + ".weight", f"expected a finite number in [-{WEIGHT_LIMIT}, {WEIGHT_LIMIT}], got {w!r}")
        if not isinstance(conn["enabled"], bool):
            raise GenomeError(f + ".enabled", f"expected a bool, got {conn['enabled']!r}")
        pairs.append((conn["in"], conn["out"]))
    if len(set(pairs)) != len(pairs):
        raise GenomeError("connections", "duplicate (in, out) connection")
    if pairs != sorted(pairs):
        raise GenomeError("connections", "connections must be sorted by (in, out)")
    if _topo_order(ids, pairs) is None:
        raise GenomeError("connections", "the connections form a cycle (feed-forward only)")


def _topo_order(ids: list[int], pairs: list[tuple[int, int]]) -> list[int] | None:
    """Kahn's order, ties broken by the smaller id; None when there is a cycle."""
    indeg = {i: 0 for i in ids}
    succ: dict[int, list[int]] = {i: [] for i in ids}
    for a, b in pairs:
        succ[a].append(b)
        indeg[b] += 1
    heap = [i for i in ids if indeg[i] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        n = heapq.heappop(heap)
        order.append(n)
        for m in succ[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                heapq.heappush(heap, m)
    return order if len(order) == len(ids) else None


def _pairs(genome: dict[str, Any], enabled_only: bool = False) -> list[tuple[int, int]]:
    return [(c["in"], c["out"]) for c in genome["connections"] if c["enabled"] or not enabled_only]


def input_reaches_output(genome: dict[str, Any]) -> bool:
    """True when a path of enabled connections leads from the input to the output."""
    succ: dict[int, list[int]] = {}
    for a, b in _pairs(genome, enabled_only=True):
        succ.setdefault(a, []).append(b)
    seen, stack = {INPUT_ID}, [INPUT_ID]
    while stack:
        n = stack.pop()
        if n == OUTPUT_ID:
            return True
        for m in succ.get(n, []):
            if m not in seen:
                seen.add(m)
                stack.append(m)
    return False


# ================================================================== evaluation
def _activate(name: str, z: np.ndarray) -> np.ndarray:
    if name == "identity":
        return z
    if name == "sin":
        return np.sin(np.clip(5.0 * z, -60.0, 60.0))
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-np.clip(5.0 * z, -60.0, 60.0)))
    if name == "square":
        return z * z
    if name == "tanh":
        return np.tanh(np.clip(2.5 * z, -60.0, 60.0))
    raise GenomeError("activation", f"unknown activation {name!r}")


def evaluate(genome: dict[str, Any], xs: np.ndarray) -> np.ndarray:
    """The output for each x (float64 array of xs' shape); deterministic."""
    xs = np.asarray(xs, dtype=np.float64)
    flat = xs.ravel()
    nodes = {n["id"]: n for n in genome["nodes"]}
    order = _topo_order(sorted(nodes), _pairs(genome))
    if order is None:
        raise GenomeError("connections", "the connections form a cycle (feed-forward only)")
    incoming: dict[int, list[tuple[int, float]]] = {}
    for c in genome["connections"]:  # sorted by (in, out): a fixed summation order
        if c["enabled"]:
            incoming.setdefault(c["out"], []).append((c["in"], float(c["weight"])))
    values: dict[int, np.ndarray] = {}
    for nid in order:
        kind = nodes[nid]["kind"]
        if kind == "input":
            values[nid] = flat
        elif kind == "bias":
            values[nid] = np.ones_like(flat)
        else:
            total = np.zeros_like(flat)
            for src, w in incoming.get(nid, []):
                total = total + w * values[src]
            values[nid] = np.clip(_activate(nodes[nid]["activation"], total), -VALUE_LIMIT, VALUE_LIMIT)
    return values[OUTPUT_ID].reshape(xs.shape).copy()


# ==================================================================== mutation
def _clip_w(w: float) -> float:
    return float(min(WEIGHT_LIMIT, max(-WEIGHT_LIMIT, w)))


def _add_node(g: dict[str, Any], rng: np.random.Generator) -> bool:
    enabled = [c for c in g["connections"] if c["enabled"]]
    if not enabled:
        return False
    conn = enabled[int(rng.integers(len(enabled)))]
    new_id = max(n["id"] for n in g["nodes"]) + 1
    act = ACTIVATIONS[int(rng.integers(len(ACTIVATIONS)))]  # reference: activation_default random
    conn["enabled"] = False  # NEAT: the split connection stays, disabled
    g["nodes"].append({"id": new_id, "kind": "hidden", "activation": act})
    g["connections"].append({"in": conn["in"], "out": new_id, "weight": 1.0, "enabled": True})
    g["connections"].append({"in": new_id, "out": conn["out"], "weight": float(conn["weight"]), "enabled": True})
    return True


def _delete_node(g: dict[str, Any], rng: np.random.Generator) -> bool:
    hidden = [n["id"] for n in g["nodes"] if n["kind"] == "hidden"]
    if not hidden:
        return False
    victim = hidden[int(rng.integers(len(hidden)))]
    g["nodes"] = [n for n in g["nodes"] if n["id"] != victim]
    g["connections"] = [c for c in g["connections"] if victim not in (c["in"], c["out"])]
    return True


def _add_connection(g: dict[str, Any], rng: np.random.Generator) -> bool:
    ids = [n["id"] for n in g["nodes"]]
    kinds = {n["id"]: n["kind"] for n in g["nodes"]}
    existing = set(_pairs(g))
    candidates = []
    for a in ids:
        if kinds[a] == "output":
            continue
        for b in ids:
            if b == a or kinds[b] in ("input", "bias") or (a, b) in existing:
                continue
            if _topo_order(ids, sorted(existing | {(a, b)})) is not None:
                candidates.append((a, b))
    if not candidates:
        return False
    a, b = candidates[int(rng.integers(len(candidates)))]
    w = _clip_w(rng.normal(0.0, WEIGHT_INIT_STDEV))
    g["connections"].append({"in": a, "out": b, "weight": w, "enabled": True})
    return True


def _change_activation(g: dict[str, Any], rng: np.random.Generator) -> bool:
    nodes = [n for n in g["nodes"] if n["kind"] in ("hidden", "output")]
    node = nodes[int(rng.integers(len(nodes)))]
    others = [a for a in ACTIVATIONS if a != node["activation"]]
    node["activation"] = others[int(rng.integers(len(others)))]
    return True


_OPS = {
    "add_node": _add_node,
    "delete_node": _delete_node,
    "add_connection": _add_connection,
    "change_activation": _change_activation,
}


def mutate_once(genome: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """One raw mutation (may be invalid): at most one structural change, then weights."""
    g = copy.deepcopy(genome)
    u = float(rng.random())
    acc = 0.0
    for name, prob in STRUCTURAL:
        acc += prob
        if u < acc:
            _OPS[name](g, rng)
            break
    for c in sorted(g["connections"], key=lambda c: (c["in"], c["out"])):
        if float(rng.random()) < WEIGHT_MUTATE_RATE:
            c["weight"] = _clip_w(c["weight"] + rng.normal(0.0, WEIGHT_MUTATE_POWER))
    return _canonical(g)


def mutate(
    genome: dict[str, Any],
    rng: np.random.Generator,
    xs: np.ndarray | None = None,
    accept: Callable[[dict[str, Any]], bool] | None = None,
    max_tries: int = MAX_TRIES,
) -> dict[str, Any]:
    """A valid child of `genome`; all randomness from `rng` (same rng state, same child).

    Valid: well formed and acyclic, the input reaches the output through enabled
    connections, outputs over `xs` (default 200 points in [-1, 1) as the reference) finite
    and different from the parent's, and `accept(child)` when given. Raises RuntimeError
    after `max_tries` invalid draws.
    """
    validate_genome(genome)
    if xs is None:
        xs = (np.arange(200) - 100.0) / 100.0
    parent_y = evaluate(genome, xs)
    for _ in range(int(max_tries)):
        child = mutate_once(genome, rng)
        try:
            validate_genome(child)
        except GenomeError:
            continue
        if not input_reaches_output(child):
            continue
        y = evaluate(child, xs)
        if not np.all(np.isfinite(y)) or np.max(np.abs(y - parent_y)) <= DIFF_TOL:
            continue
        if accept is not None and not accept(child):
            continue
        return child
    raise RuntimeError(f"no valid CPPN mutation in {max_tries} tries")


def num_hidden(genome: dict[str, Any]) -> int:
    return sum(1 for n in genome["nodes"] if n["kind"] == "hidden")


def num_enabled_connections(genome: dict[str, Any]) -> int:
    return sum(1 for c in genome["connections"] if c["enabled"])
