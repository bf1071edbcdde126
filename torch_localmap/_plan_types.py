"""The plan as typed values, and its document (JSON) reader and writer.

`Plan.from_document` is the only place that reads a plan document by key; everything
else (the SPMD runtime, parallelize, reports, the CLI) uses the fields below. The
document's layout is documented in csrc/core/plan_json.h; its version is
`Plan.FORMAT_VERSION` (the C++ writer's), and other versions are refused. A document
read from a file is validated in C++ (core/plan_check.h: every spec against the plan's
own mesh and tensor shapes) and carries the fingerprint of what it was made for
(core/plan_fingerprint.h), which applying it checks (plan.plan_joint(plan=...)).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import ClassVar

from . import _C

__all__ = ["NodePlan", "SolverSummary", "MemoryEstimate", "PlanSummary", "Plan", "PlanMismatchError"]


class PlanMismatchError(ValueError):
    """A saved plan applied to a graph, mesh or call it was not made for; the message
    names what differs (the mesh shape, an input's shape, the boundary options, the node
    count or the first differing node)."""


@dataclass(frozen=True)
class NodePlan:
    """One node's choice. `inputs`: the spec each tensor input is redistributed to;
    `outputs`: the spec each output is produced in. For the graph's output node,
    `inputs` holds the spec each graph output leaves in (None: not a tensor)."""

    name: str
    op: str
    inputs: tuple
    outputs: tuple
    compute_s: float
    comm_s: float
    family: str = ""
    num_strategies: int = 0
    fell_back: bool = False
    # Backward recomputes this value instead of keeping it from forward (core/recompute.h),
    # for recompute_s more compute.
    recompute: bool = False
    recompute_s: float = 0.0
    bytes: int = 0  # its outputs per rank (parameters: with their optimizer state)
    # Inputs the plan moves: {"input", "producer" (IR index), "from", "to", "seconds", "collectives"}.
    redistributions: tuple = ()
    # Where the node comes from (set when planned in this process, kept in the plan file):
    # the module call ("layers.0", "layers.0@1") or local_map region ("local_map:attn")
    # that made it, its phase, and its autograd sequence number (a backward node shares
    # the number of the forward node it differentiates).
    region: str = ""
    module: str = ""  # the module call, also for nodes of a local_map region
    phase: str = ""  # "input" | "forward" | "backward" | "output"
    seq_nr: int = -1
    role: str = ""  # placeholders: "param" | "buffer" | "input" ...
    target: str = ""  # placeholders: the parameter / buffer FQN or input name
    # The tensors the specs place (the plan file validates against them): the shape of
    # each strategy input (None: not a tensor) and of each output, the outputs' dtypes.
    input_shapes: tuple = ()
    output_shapes: tuple = ()
    output_dtypes: tuple = ()


@dataclass(frozen=True)
class SolverSummary:
    cost: int  # exact, in picoseconds
    bound: float  # proven lower bound on the optimum
    gap: float  # (cost - bound) / cost
    seconds: float
    status: str  # "optimal" | "gap_tolerance" | "good_enough" | "time_limit" | "stalled"
    note: str = ""  # e.g. "HiGHS unavailable: MILP phases off (...)"


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per rank of a training step under the plan (csrc/core/memory_estimate.h):
    parameter (and buffer) shards, their gradients, optimizer state, the live values at
    the step's peak, and the peak (parameters + optimizer state + live values)."""

    parameters: int = 0
    gradients: int = 0
    optimizer_state: int = 0
    activations: int = 0
    peak: int = 0

    def describe(self) -> str:
        mib = 2.0 ** 20
        return (f"peak {self.peak / mib:.2f} MiB/rank = parameters {self.parameters / mib:.2f} + optimizer state "
                f"{self.optimizer_state / mib:.2f} + live values {(self.peak - self.parameters - self.optimizer_state) / mib:.2f} "
                f"(activations {self.activations / mib:.2f}, gradients up to {self.gradients / mib:.2f})")


@dataclass(frozen=True)
class PlanSummary:
    estimated_step_s: float
    compute_s: float
    comm_s: float
    peak_bytes: int
    solver: SolverSummary
    fallback_ops: tuple  # ops without a sharding rule (they run replicated)
    strategy_counts: dict  # family -> (nodes, strategies)
    device: str
    mode: str  # "train" | "compile"
    memory: MemoryEstimate = MemoryEstimate()
    memory_limit: int = 0  # per rank, bytes the plan was made under (0: none)
    memory_limit_source: str = ""  # e.g. "device H100: 74.5 GiB minus 10% headroom"
    build_seconds: float = 0.0  # strategies and cost tables, before the solve
    # Live bytes per rank while IR node memory_timeline[0][k] runs: memory_timeline[1][k]
    # (parameters and optimizer state come on top); the solve's (seconds, cost s, bound s).
    memory_timeline: tuple = ((), ())
    solver_progress: tuple = ()
    recompute_s: float = 0.0  # backward's recompute of values not kept (in estimated_step_s)
    # Repeated blocks (core/symmetry.h): {"repeated": n, "alike": bool, "asymmetry_gain_s": s}, and
    # "folded": what the tied first solve did (core/fold_blocks.h) and "folded_cost" (the cost of
    # its plan, as a decimal string like the solver's), when one ran.
    blocks: dict = dataclasses.field(default_factory=dict)


def _timeline_of(doc) -> tuple:
    if not doc:
        return ((), ())
    nodes, sizes = tuple(int(x) for x in doc["node"]), tuple(int(x) for x in doc["bytes"])
    if len(nodes) != len(sizes):
        raise ValueError("memory_timeline: 'node' and 'bytes' differ in length")
    return (nodes, sizes)


def _progress_of(doc) -> tuple:
    if not doc:
        return ()
    cols = [doc["seconds"], doc["cost"], doc["bound"]]
    if len({len(c) for c in cols}) != 1:
        raise ValueError("solver_progress: 'seconds', 'cost' and 'bound' differ in length")
    return tuple((float(a), float(b), float(c)) for a, b, c in zip(*cols))


def _shapes(doc) -> tuple:
    return tuple(None if x is None else tuple(int(s) for s in x) for x in doc)


@dataclass
class Plan:
    """A solved plan: per node its strategy and costs, per graph output its spec, a summary.

    `graph` (the exported IR, ir_export.ExportedGraph) and `joint` (the traced joint graph)
    are set for a plan made in this process; a plan read from a file has neither: enough
    to read and report. To run it, pass it to parallelize(..., plan=) or the compile
    backend's options["plan"], which trace the model and check it was made for it.
    """

    mesh_shape: tuple
    mesh_dim_names: tuple | None
    nodes: list  # NodePlan per IR node; the output node last
    summary: PlanSummary
    graph: object = None
    joint: object = None
    options: str = ""  # the planner options (JSON) this plan was made with
    module_calls: list = dataclasses.field(default_factory=list)  # _trace.ModuleCall dicts, in call order
    # What the plan was made for: {"hash", "graph", "boundary", "nodes"} (core/plan_fingerprint.h).
    fingerprint: dict = dataclasses.field(default_factory=dict)
    # Set when this plan was made from the plan of the same program at other sizes
    # (plan_joint's `previous`): {"replanned", "reason", "previous_cost_s", "best_cost_s", "bound_s"}.
    transfer: dict | None = None
    # Set by parallelize(measure_candidates=k): each candidate's measured and estimated step
    # on the real mesh and which was kept (_measure.py).
    measurements: dict | None = None

    FORMAT_VERSION: ClassVar[int] = _C.PLAN_FORMAT_VERSION

    # ---- what the runtime and reports ask ---------------------------------------------

    @property
    def output_specs(self) -> tuple:
        """The spec each graph output leaves in (None: not a tensor)."""
        return self.nodes[-1].inputs

    def recomputed_nodes(self) -> list:
        """Indices of the nodes backward recomputes instead of forward keeping them."""
        return [i for i, n in enumerate(self.nodes) if n.recompute]

    def param_placements(self) -> dict:
        """{parameter FQN: spec string} in parameter order (a plan read from a file: from the
        placeholders' labels it was saved with)."""
        if self.graph is None and any(n.role == "param" for n in self.nodes):
            return {n.target: n.outputs[0] for n in self.nodes if n.role == "param"}
        return {n.target: self.nodes[i].outputs[0] for i, n in self._graph().placeholders() if n.role == "param"}

    def state_placements(self) -> dict:
        """{parameter or buffer FQN: spec string}, parameters first, in graph order."""
        g = self._graph()
        return {n.target: self.nodes[i].outputs[0] for role in ("param", "buffer")
                for i, n in g.placeholders() if n.role == role}

    def placeholder_specs(self) -> list:
        """Spec of every placeholder, in graph order."""
        return [self.nodes[i].outputs[0] for i, _ in self._graph().placeholders()]

    def _graph(self):
        if self.graph is None:
            raise ValueError("this plan was read from a file: it has no graph (parallelize(model, mesh, example_args, "
                             "plan=plan) traces the model and applies it)")
        return self.graph

    # ---- the document ------------------------------------------------------------------

    @classmethod
    def from_document(cls, doc, source: str = "plan", validate: bool = True) -> "Plan":
        """Validates and reads a plan document (a dict); errors name `source`, the node and the
        field. `validate=False` is for documents the planner just wrote (nothing edited them)."""
        if not isinstance(doc, dict):
            raise ValueError(f"{source}: expected a JSON object, got {type(doc).__name__}")
        if "format_version" not in doc:
            raise ValueError(f"{source}: no format_version; expected a plan document written by torch_localmap "
                             f"(format_version {cls.FORMAT_VERSION})")
        if validate:
            try:
                _C.check_plan_document(json.dumps(doc))
            except ValueError as e:
                raise ValueError(f"{source}: {e}") from None
        if doc["format_version"] != cls.FORMAT_VERSION:
            raise ValueError(f"{source}: format_version {doc['format_version']!r}; this torch_localmap reads "
                             f"format_version {cls.FORMAT_VERSION}")
        try:
            mesh, s = doc["mesh"], doc["summary"]
            nodes = [NodePlan(name=n["name"], op=n["op"], inputs=tuple(n["strategy"]["inputs"]),
                              outputs=tuple(n["strategy"]["outputs"]), compute_s=float(n["compute_s"]),
                              comm_s=float(n["comm_s"]), family=n.get("family", ""),
                              num_strategies=int(n.get("num_strategies", 0)), fell_back=bool(n.get("fell_back")),
                              recompute=bool(n.get("recompute")), recompute_s=float(n.get("recompute_s", 0.0)),
                              bytes=int(n.get("bytes", 0)),
                              redistributions=tuple(dict(r) for r in n.get("redistributions", ())),
                              region=str(n.get("region", "")), module=str(n.get("module", "")),
                              phase=str(n.get("phase", "")),
                              seq_nr=int(n.get("seq_nr", -1)), role=str(n.get("role", "")),
                              target=str(n.get("target", "")),
                              input_shapes=_shapes(n.get("tensors", {}).get("inputs", ())),
                              output_shapes=_shapes(n.get("tensors", {}).get("outputs", ())),
                              output_dtypes=tuple(str(d) for d in n.get("tensors", {}).get("dtypes", ())))
                     for n in doc["nodes"]]
            sol = s["solver"]
            summary = PlanSummary(
                estimated_step_s=float(s["estimated_step_s"]), compute_s=float(s["compute_s"]),
                comm_s=float(s["comm_s"]), peak_bytes=int(s["peak_bytes"]),
                solver=SolverSummary(cost=int(sol["cost"]), bound=float(sol["bound"]), gap=float(sol["gap"]),
                                     seconds=float(sol["seconds"]), status=sol["status"], note=sol.get("note", "")),
                fallback_ops=tuple(s["fallback_ops"]),
                strategy_counts={k: (int(v["nodes"]), int(v["strategies"]))
                                 for k, v in (s.get("strategy_counts") or {}).items()},
                device=s["device"], mode=s["mode"],
                memory=MemoryEstimate(**{k: int(v) for k, v in (s.get("memory") or {}).items()}),
                memory_limit=int(s.get("memory_limit", 0)), memory_limit_source=str(s.get("memory_limit_source", "")),
                build_seconds=float(s.get("build_seconds", 0.0)),
                memory_timeline=_timeline_of(s.get("memory_timeline")),
                solver_progress=_progress_of(s.get("solver_progress")),
                recompute_s=float(s.get("recompute_s", 0.0)), blocks=dict(s.get("blocks") or {}))
            return cls(mesh_shape=tuple(mesh["shape"]), mesh_dim_names=tuple(mesh.get("dim_names") or ()) or None,
                       nodes=nodes, summary=summary, options=str(doc.get("options", "")),
                       module_calls=[dict(c) for c in doc.get("module_calls", ())],
                       fingerprint=dict(doc.get("fingerprint") or {}))
        except KeyError as e:
            raise ValueError(f"{source}: missing field {e}") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"{source}: malformed plan document ({e})") from None

    def to_document(self) -> dict:
        """The plan document (the inverse of from_document)."""
        s = self.summary
        nodes = []
        for i, n in enumerate(self.nodes):
            d = {"name": n.name, "op": n.op, "strategy": {"inputs": list(n.inputs), "outputs": list(n.outputs)},
                 "compute_s": n.compute_s, "comm_s": n.comm_s}
            if n.redistributions:
                d["redistributions"] = [dict(r) for r in n.redistributions]
            if i + 1 < len(self.nodes):
                d["family"] = n.family
                d["num_strategies"] = n.num_strategies
                d["bytes"] = n.bytes
                if n.fell_back:
                    d["fell_back"] = True
                if n.recompute:
                    d["recompute"], d["recompute_s"] = True, n.recompute_s
            for key in ("region", "module", "phase", "role", "target"):
                if getattr(n, key):
                    d[key] = getattr(n, key)
            if n.seq_nr >= 0:
                d["seq_nr"] = n.seq_nr
            d["tensors"] = {"inputs": [None if x is None else list(x) for x in n.input_shapes],
                            "outputs": [list(x) for x in n.output_shapes], "dtypes": list(n.output_dtypes)}
            nodes.append(d)
        solver = {"cost": str(s.solver.cost), "bound": s.solver.bound, "gap": s.solver.gap,
                  "seconds": s.solver.seconds, "status": s.solver.status}
        if s.solver.note:
            solver["note"] = s.solver.note
        return {"format_version": self.FORMAT_VERSION,
                "mesh": {"shape": list(self.mesh_shape), "dim_names": list(self.mesh_dim_names or ())},
                "fingerprint": dict(self.fingerprint),
                "nodes": nodes,
                "summary": {"estimated_step_s": s.estimated_step_s, "compute_s": s.compute_s, "comm_s": s.comm_s,
                            "recompute_s": s.recompute_s, "blocks": dict(s.blocks),
                            "peak_bytes": s.peak_bytes, "solver": solver, "fallback_ops": list(s.fallback_ops),
                            "strategy_counts": {k: {"nodes": a, "strategies": b}
                                                for k, (a, b) in s.strategy_counts.items()},
                            "device": s.device, "mode": s.mode, "memory": dataclasses.asdict(s.memory),
                            "memory_limit": s.memory_limit, "memory_limit_source": s.memory_limit_source,
                            "build_seconds": s.build_seconds,
                            "memory_timeline": {"node": list(s.memory_timeline[0]),
                                                "bytes": list(s.memory_timeline[1])},
                            "solver_progress": {"seconds": [p[0] for p in s.solver_progress],
                                                "cost": [p[1] for p in s.solver_progress],
                                                "bound": [p[2] for p in s.solver_progress]}},
                "options": self.options,
                "module_calls": [dict(c) for c in self.module_calls]}

    def to_json(self) -> str:
        return json.dumps(self.to_document(), separators=(",", ":"))

    def save(self, path) -> None:
        with open(path, "w") as f:
            f.write(self.to_json())

    @classmethod
    def load(cls, path) -> "Plan":
        """Reads a plan file written by `save` (or `python -m torch_localmap plan --out`)."""
        with open(path) as f:
            try:
                doc = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"plan file {path}: not JSON ({e})") from None
        return cls.from_document(doc, source=f"plan file {path}")
