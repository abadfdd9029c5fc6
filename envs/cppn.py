"""A small NEAT-style CPPN (compositional pattern-producing network), numpy only.

Enhanced POET (uber-research/poet, `poet_distributed/niches/box2d/cppn.py` with its
`config-cppn`) draws its BipedalWalker ground from a CPPN evolved with neat-python 0.92's
DefaultGenome. This module is a self-contained replacement holding the genome as plain
data, so it round-trips through JSON exactly and draws all randomness from a numpy
Generator (neat-python draws from Python's global `random`).

Genome (plain data: nested dicts/lists of numbers, strings and bools)::

    {"nodes": [{"id": -1, "kind": "input",  "activation": "identity"},
               {"id":  0, "kind": "output", "activation": "identity", "bias": 0.01, "response": 1.0},
               {"id":  1, "kind": "hidden", "activation": "sin", "bias": -0.2, "response": 1.0}, ...],
     "connections": [{"in": -1, "out": 0, "weight": 0.5, "enabled": true}, ...]}

* exactly one input node (fed `x`), at most one bias node (id -2, fed 1.0; only in the
  genomes of our older "extended"/"flat" scheme, NEAT has none), exactly one output;
  input and bias nodes have no incoming connections, the output none outgoing;
* hidden and output nodes may carry "bias" (finite, |bias| <= 10; default 0.0) and
  "response" (finite; default 1.0), neat-python's node attributes; genomes without them
  (older runs) stay valid and keep their ids: defaults are never written into them;
* nodes are kept sorted by id, connections by (in, out); a pair (in, out) appears once;
* the graph over ALL connections (enabled or not) is acyclic (feed-forward);
* a node's value is activation(bias + response * sum of weight * source value over its
  enabled incoming connections), summed in (in, out) order (neat-python's sum
  aggregation); evaluation visits nodes in a topological order whose ties are broken by
  the smaller node id, so results are deterministic.

Activations follow neat-python's: identity z; sin sin(5z); sigmoid 1 / (1 + exp(-5z));
square z**2; tanh tanh(2.5z) (sin, sigmoid and tanh clamp their scaled argument to
[-60, 60]). Ours: every node value is clipped to [-VALUE_LIMIT, VALUE_LIMIT] so chained
squares cannot overflow (neat-python raises OverflowError there).

Mutation (`mutate`), two operator sets:

* "reference" (default): the reference's `CppnEnvParams.get_mutated_params` with
  neat-python 0.92 `DefaultGenome.mutate` under config-cppn. The output node's response
  is reset to 1.0; then one structural draw r: r < 0.1 add a node (split a random
  connection, enabled or not: it is disabled, in->new gets weight 1.0, new->out the old
  weight; the new node has bias N(0, 0.1), response 1.0, a random activation),
  0.1 <= r < 0.175 delete a random hidden node and its connections (conn add/delete
  probabilities are 0); then every connection's weight (rate 0.75: w + N(0, 0.1), clamped
  to [-10, 10]) and every hidden/output node's bias (rate 0.75: b + N(0, 0.1), clamped)
  and response (rate 0) mutate, one uniform draw per attribute; activations never change.
  A child is valid when the input reaches the output over ALL connections
  (`is_genome_valid`), it differs from the parent (neat's distance > 0), and, with
  y = cppn(x) over x_i = (i - 100) / 100, i = 0..199, y -= y[0], threshold = |max y| > 0.
  A valid child's output response becomes (u / 2 + 0.25) / threshold when threshold < 0.25
  and (4u + 12) / threshold when threshold > 16 (u uniform in [0, 1) from the rng), as
  the reference rescales. Ours on top: finite outputs and response, an invalid child is
  redrawn at most `max_tries` times (the reference loops forever) and then RuntimeError;
  a child whose output node neat-python would never evaluate (some node on an enabled
  path to the output has no enabled incoming connection: neat's FeedForwardNetwork then
  leaves the output at 0, so the reference's threshold is 0) is invalid, so our
  evaluation and neat-python's agree on every accepted child.
* "extended" (ours, the scheme of earlier versions): a bias node instead of node biases,
  one structural mutation per call among add node (0.1, splitting an enabled connection),
  delete node (0.075), add connection (0.1, new weight N(0, 0.25)) and change activation
  (0.1), then weights as above; valid when well formed, the input reaches the output
  through enabled connections, and the outputs over the given x are finite and differ
  from the parent's by more than 1e-9.

Both accept an optional caller predicate `accept(child)`.

Starts (`initial_genome`): "reference" is the reference's `configure_new` with
initial_connection full and num_hidden 0, output activation forced to identity: output
bias N(0, 0.1) (clamped to [-10, 10]), then one connection -1 -> 0 with weight N(0, 0.25)
(clamped), drawn in that order from the rng: a random slope. "flat" (ours, earlier
versions): input and bias node into an identity output with zero weights.
"""

from __future__ import annotations

import copy
import heapq
import math
from collections.abc import Callable
from typing import Any

import numpy as np

ACTIVATIONS = ("identity", "sin", "sigmoid", "square", "tanh")
KINDS = ("input", "bias", "hidden", "output")
INPUT_ID, BIAS_ID, OUTPUT_ID = -1, -2, 0
WEIGHT_LIMIT = 10.0
BIAS_LIMIT = 10.0
VALUE_LIMIT = 1e6
OPERATORS = ("reference", "extended")
INITIAL_STYLES = ("reference", "flat")

# Reference config-cppn (neat-python 0.92 DefaultGenome).
WEIGHT_INIT_STDEV = 0.25
WEIGHT_MUTATE_RATE = 0.75
WEIGHT_MUTATE_POWER = 0.1
WEIGHT_REPLACE_RATE = 0.0
BIAS_INIT_STDEV = 0.1
BIAS_MUTATE_RATE = 0.75
BIAS_MUTATE_POWER = 0.1
BIAS_REPLACE_RATE = 0.0
RESPONSE_INIT = 1.0
RESPONSE_MUTATE_RATE = 0.0
RESPONSE_REPLACE_RATE = 0.0
NODE_ADD_PROB = 0.1
NODE_DELETE_PROB = 0.075
CONN_ADD_PROB = 0.0
CONN_DELETE_PROB = 0.0
# The reference's amplitude window (CppnEnvParams.get_mutated_params) and its x grid.
THRESHOLD_LOW = 0.25
THRESHOLD_HIGH = 16.0
REFERENCE_X = (np.arange(200) - 100.0) / 100.0
MAX_TRIES_REFERENCE = 10_000  # ours: the reference retries forever

# Ours ("extended"): one structural mutation per call at most, drawn with these probabilities.
STRUCTURAL = (("add_node", 0.1), ("delete_node", 0.075), ("add_connection", 0.1), ("change_activation", 0.1))
MAX_TRIES = 100
DIFF_TOL = 1e-9


class GenomeError(ValueError):
    """A malformed genome; `field` names the bad part (e.g. 'nodes[2].activation')."""

    def __init__(self, field_name: str, message: str):
        self.field = field_name
        super().__init__(f"{field_name}: {message}")


# ================================================================ construction
def flat_genome(weight: float = 0.0, bias_weight: float = 0.0) -> dict[str, Any]:
    """Ours ("flat" start): input x and a bias node into one identity output; zero weights: flat."""
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


def reference_genome(weight: float, bias: float = 0.0, response: float = RESPONSE_INIT) -> dict[str, Any]:
    """The reference's start shape: x -> identity output (with bias and response), no bias node."""
    return {
        "nodes": [
            {"id": INPUT_ID, "kind": "input", "activation": "identity"},
            {
                "id": OUTPUT_ID,
                "kind": "output",
                "activation": "identity",
                "bias": float(bias),
                "response": float(response),
            },
        ],
        "connections": [{"in": INPUT_ID, "out": OUTPUT_ID, "weight": float(weight), "enabled": True}],
    }


def initial_genome(rng: np.random.Generator | None = None, style: str = "reference") -> dict[str, Any]:
    """A start genome.

    "reference": neat-python's `configure_new` as the reference calls it: output bias
    N(0, 0.1), then weight N(0, 0.25) of the one connection x -> output (identity), both
    clamped to [-10, 10] and drawn in that order from `rng` (None: PCG64(0), so the start
    is deterministic). "flat" (ours): `flat_genome()`, zero weights; `rng` is unused.
    """
    if style == "flat":
        return flat_genome()
    if style != "reference":
        raise ValueError(f"initial genome style: expected one of {', '.join(INITIAL_STYLES)}, got {style!r}")
    if rng is None:
        rng = np.random.Generator(np.random.PCG64(0))
    bias = _clamp(float(rng.normal(0.0, BIAS_INIT_STDEV)), BIAS_LIMIT)
    weight = _clamp(float(rng.normal(0.0, WEIGHT_INIT_STDEV)), WEIGHT_LIMIT)
    return reference_genome(weight, bias)


def _canonical(genome: dict[str, Any]) -> dict[str, Any]:
    nodes = sorted(genome["nodes"], key=lambda n: n["id"])
    conns = sorted(genome["connections"], key=lambda c: (c["in"], c["out"]))
    return {"nodes": nodes, "connections": conns}


# ================================================================== validation
def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_NODE_KEYS = {"id", "kind", "activation"}
_NODE_OPTIONAL = {"bias", "response"}


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
        if not isinstance(node, dict) or not _NODE_KEYS <= set(node) <= _NODE_KEYS | _NODE_OPTIONAL:
            raise GenomeError(f, "expected a dict with keys id, kind, activation (and optionally bias, response)")
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
        for key in sorted(_NODE_OPTIONAL & set(node)):
            if node["kind"] in ("input", "bias"):
                raise GenomeError(f"{f}.{key}", f"{node['kind']} nodes have no {key}")
            v = node[key]
            limit = BIAS_LIMIT if key == "bias" else math.inf
            if not _is_num(v) or not math.isfinite(v) or abs(v) > limit:
                want = f"a finite number in [-{BIAS_LIMIT}, {BIAS_LIMIT}]" if key == "bias" else "a finite number"
                raise GenomeError(f"{f}.{key}", f"expected {want}, got {v!r}")
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
            raise GenomeError(
                f + ".weight", f"expected a finite number in [-{WEIGHT_LIMIT}, {WEIGHT_LIMIT}], got {w!r}"
            )
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


def input_reaches_output(genome: dict[str, Any], enabled_only: bool = True) -> bool:
    """True when a path leads from the input to the output: through enabled connections by
    default; over all connections, enabled or not, with `enabled_only=False` (the
    reference's `is_genome_valid`)."""
    succ: dict[int, list[int]] = {}
    for a, b in _pairs(genome, enabled_only=enabled_only):
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


def neat_evaluates_output(genome: dict[str, Any]) -> bool:
    """True when neat-python's FeedForwardNetwork would compute the output node.

    It computes a node only once all its enabled sources are computed and never computes a
    node without enabled incoming connections; an output it never computes reads 0. That
    happens exactly when some node with an enabled path to the output (or the output
    itself) has no enabled incoming connection.
    """
    kinds = {n["id"]: n["kind"] for n in genome["nodes"]}
    pred: dict[int, list[int]] = {}
    for a, b in _pairs(genome, enabled_only=True):
        pred.setdefault(b, []).append(a)
    seen, stack = {OUTPUT_ID}, [OUTPUT_ID]
    while stack:
        n = stack.pop()
        if not pred.get(n):
            return False
        for m in pred[n]:
            if m not in seen and kinds[m] not in ("input", "bias"):
                seen.add(m)
                stack.append(m)
    return True


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
    """The output for each x (float64 array of xs' shape); deterministic.

    A hidden/output node's value is activation(bias + response * sum); a node without the
    "bias"/"response" keys skips that term (bit-identical to bias 0, response 1).
    """
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
    with np.errstate(over="ignore", invalid="ignore"):
        for nid in order:
            node = nodes[nid]
            kind = node["kind"]
            if kind == "input":
                values[nid] = flat
            elif kind == "bias":
                values[nid] = np.ones_like(flat)
            else:
                total = np.zeros_like(flat)
                for src, w in incoming.get(nid, []):
                    total = total + w * values[src]
                if "response" in node:
                    total = float(node["response"]) * total
                if "bias" in node:
                    total = float(node["bias"]) + total
                values[nid] = np.clip(_activate(node["activation"], total), -VALUE_LIMIT, VALUE_LIMIT)
    return values[OUTPUT_ID].reshape(xs.shape).copy()


# ==================================================================== mutation
def _clamp(v: float, limit: float) -> float:
    return float(min(limit, max(-limit, v)))


def _clip_w(w: float) -> float:
    return _clamp(w, WEIGHT_LIMIT)


# ---------------------------------------------------------- "extended" (ours)
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


def _mutate_once_extended(genome: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
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


# ------------------------------------------------------- "reference" (neat 0.92)
def _mutate_float(
    value: float,
    rng: np.random.Generator,
    rate: float,
    power: float,
    replace_rate: float,
    init: Callable[[], float],
    limit: float,
) -> float:
    """neat-python's FloatAttribute.mutate_value: one uniform r; perturb, re-init or keep."""
    r = float(rng.random())
    if r < rate:
        return _clamp(value + float(rng.normal(0.0, power)), limit)
    if r < rate + replace_rate:
        return init()
    return float(value)


def _new_bias(rng: np.random.Generator) -> float:
    return _clamp(float(rng.normal(0.0, BIAS_INIT_STDEV)), BIAS_LIMIT)


def _add_node_reference(g: dict[str, Any], rng: np.random.Generator) -> bool:
    """neat's mutate_add_node: split a random connection among ALL (enabled or not)."""
    conns = g["connections"]
    if not conns:
        return False  # neat would try add-connection here, whose probability is 0
    conn = conns[int(rng.integers(len(conns)))]
    new_id = max(n["id"] for n in g["nodes"]) + 1  # neat counts up from the max id: a label only
    bias = _new_bias(rng)
    act = ACTIVATIONS[int(rng.integers(len(ACTIVATIONS)))]  # activation_default = random
    conn["enabled"] = False
    g["nodes"].append({"id": new_id, "kind": "hidden", "activation": act, "bias": bias, "response": RESPONSE_INIT})
    conns.append({"in": conn["in"], "out": new_id, "weight": 1.0, "enabled": True})
    conns.append({"in": new_id, "out": conn["out"], "weight": float(conn["weight"]), "enabled": True})
    return True


def _mutate_once_reference(genome: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    g = _canonical(copy.deepcopy(genome))
    for n in g["nodes"]:
        if n["id"] == OUTPUT_ID:
            n["response"] = 1.0  # get_mutated_params: mutated.nodes[0].response = 1.0
    div = max(1.0, NODE_ADD_PROB + NODE_DELETE_PROB + CONN_ADD_PROB + CONN_DELETE_PROB)
    r = float(rng.random())
    if r < NODE_ADD_PROB / div:
        _add_node_reference(g, rng)
    elif r < (NODE_ADD_PROB + NODE_DELETE_PROB) / div:
        _delete_node(g, rng)  # neat: a random non-output node of the node dict = a hidden node
    # (conn_add_prob and conn_delete_prob are 0 in config-cppn: no other structural branch)
    g = _canonical(g)
    for c in g["connections"]:
        c["weight"] = _mutate_float(
            c["weight"],
            rng,
            WEIGHT_MUTATE_RATE,
            WEIGHT_MUTATE_POWER,
            WEIGHT_REPLACE_RATE,
            lambda: _clip_w(float(rng.normal(0.0, WEIGHT_INIT_STDEV))),
            WEIGHT_LIMIT,
        )  # enabled_mutate_rate 0: no draw
    for n in g["nodes"]:
        if n["kind"] not in ("hidden", "output"):
            continue
        n["bias"] = _mutate_float(
            n.get("bias", 0.0),
            rng,
            BIAS_MUTATE_RATE,
            BIAS_MUTATE_POWER,
            BIAS_REPLACE_RATE,
            lambda: _new_bias(rng),
            BIAS_LIMIT,
        )
        n["response"] = _mutate_float(
            n.get("response", RESPONSE_INIT),
            rng,
            RESPONSE_MUTATE_RATE,
            0.2,
            RESPONSE_REPLACE_RATE,
            lambda: RESPONSE_INIT,
            math.inf,
        )
        # activation_mutate_rate and aggregation_mutate_rate are 0: no draw, no change
    return g


def _semantic(genome: dict[str, Any]) -> dict[str, Any]:
    """The genome with node defaults filled in: equal iff neat's distance would be 0."""
    g = _canonical(copy.deepcopy(genome))
    for n in g["nodes"]:
        if n["kind"] in ("hidden", "output"):
            n["bias"] = float(n.get("bias", 0.0))
            n["response"] = float(n.get("response", RESPONSE_INIT))
    return g


def response_rescale(threshold: float, u: float) -> float | None:
    """The reference's new output response for amplitude `threshold` and uniform draw `u`,
    or None when the threshold lies in [0.25, 16] (response stays 1.0)."""
    if threshold < THRESHOLD_LOW:
        return (u / 2.0 + 0.25) / threshold
    if threshold > THRESHOLD_HIGH:
        return (u * 4.0 + 12.0) / threshold
    return None


def mutate_once(genome: dict[str, Any], rng: np.random.Generator, operators: str = "reference") -> dict[str, Any]:
    """One raw mutation (may be invalid; no response rescale): at most one structural
    change, then attributes."""
    _check_operators(operators)
    if operators == "reference":
        return _mutate_once_reference(genome, rng)
    return _mutate_once_extended(genome, rng)


def _check_operators(operators: str) -> None:
    if operators not in OPERATORS:
        raise ValueError(f"CPPN operators: expected one of {', '.join(OPERATORS)}, got {operators!r}")


def mutate(
    genome: dict[str, Any],
    rng: np.random.Generator,
    xs: np.ndarray | None = None,
    accept: Callable[[dict[str, Any]], bool] | None = None,
    max_tries: int | None = None,
    operators: str = "reference",
) -> dict[str, Any]:
    """A valid child of `genome`; all randomness from `rng` (same rng state, same child).

    `operators` "reference" (default) or "extended": see the module docstring for each
    scheme's operators and validity. `xs` defaults to the reference's 200 points in
    [-1, 1). `max_tries` defaults to MAX_TRIES_REFERENCE (reference) or MAX_TRIES
    (extended); RuntimeError after that many invalid draws.
    """
    _check_operators(operators)
    validate_genome(genome)
    if xs is None:
        xs = REFERENCE_X
    if max_tries is None:
        max_tries = MAX_TRIES_REFERENCE if operators == "reference" else MAX_TRIES
    if operators == "reference":
        return _mutate_reference(genome, rng, xs, accept, int(max_tries))
    parent_y = evaluate(genome, xs)
    for _ in range(int(max_tries)):
        child = _mutate_once_extended(genome, rng)
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
    raise RuntimeError(f"no valid CPPN mutation (operators 'extended') in {max_tries} tries")


def _mutate_reference(
    genome: dict[str, Any],
    rng: np.random.Generator,
    xs: np.ndarray,
    accept: Callable[[dict[str, Any]], bool] | None,
    max_tries: int,
) -> dict[str, Any]:
    parent = _semantic(genome)
    for _ in range(max_tries):
        child = _mutate_once_reference(genome, rng)
        try:
            validate_genome(child)
        except GenomeError:
            continue
        # is_genome_valid (all connection keys), then neat's distance > 0
        if not input_reaches_output(child, enabled_only=False) or _semantic(child) == parent:
            continue
        if not neat_evaluates_output(child):  # neat's output would read 0: threshold 0
            continue
        y = evaluate(child, xs)
        if not np.all(np.isfinite(y)):
            continue
        y = y - y[0]
        threshold = float(abs(np.max(y)))
        if threshold == 0.0:
            continue
        if threshold < THRESHOLD_LOW or threshold > THRESHOLD_HIGH:
            response = response_rescale(threshold, float(rng.random()))
            if response is None or not math.isfinite(response):
                continue
            for n in child["nodes"]:
                if n["id"] == OUTPUT_ID:
                    n["response"] = float(response)
            y = evaluate(child, xs)
            # Where node values hit VALUE_LIMIT (neat would overflow) the rescale cannot work: skip.
            if not np.all(np.isfinite(y)) or not THRESHOLD_LOW * (1 - 1e-9) <= abs(
                float(np.max(y - y[0]))
            ) <= THRESHOLD_HIGH * (1 + 1e-9):
                continue
        if accept is not None and not accept(child):
            continue
        return child
    raise RuntimeError(
        f"no valid CPPN mutation (operators 'reference') in {max_tries} tries; the reference retries forever"
    )


def num_hidden(genome: dict[str, Any]) -> int:
    return sum(1 for n in genome["nodes"] if n["kind"] == "hidden")


def num_enabled_connections(genome: dict[str, Any]) -> int:
    return sum(1 for c in genome["connections"] if c["enabled"])
