"""Reading a plan: per-module report, graph-order view, one choice explained, HTML page.

    report = torch_localmap.report.build_report(plan)      # a JSON-ready dict
    print(format_modules(report))                          # one entry per module call
    print(format_graph(report, limit=200))                 # what the solver sees, in graph order
    print(format_explanation(explain(plan, "layers.0.mlp.w1.weight")))
    write_report_html(plan, "plan.html")                   # self-contained page

Everything here reads what the C++ planner decided and priced (per node: strategy,
compute, redistributions with their collectives, bytes; the memory timeline; the
solver's progress) and groups it; `explain` asks C++ to price the alternatives.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict

__all__ = ["build_report", "format_modules", "format_graph", "explain", "format_explanation",
           "replication_reason", "write_report_html", "write_report_json"]

REPORT_FORMAT = "torch_localmap.report/1"
_MAX_TIMELINE_POINTS = 2000  # the page stays light for 40k-node graphs; each bucket keeps its peak


def _collective_kind(text: str) -> str:
    return text.split(" ", 1)[0]


def _empty_phase() -> dict:
    return {"compute_s": 0.0, "comm_s": 0.0, "collectives": {}}


def _add_node(phase: dict, node) -> None:
    phase["compute_s"] += node.compute_s
    phase["comm_s"] += node.comm_s
    for r in node.redistributions:
        kinds = [_collective_kind(c) for c in r.get("collectives", ())]
        for kind in kinds:
            c = phase["collectives"].setdefault(kind, {"count": 0, "seconds": 0.0})
            c["count"] += 1
            c["seconds"] += float(r.get("seconds", 0.0)) / len(kinds)


class _Calls:
    """The module call tree: parent links and, per call, the calls inside it."""

    def __init__(self, calls: list):
        self.calls = calls
        self.by_name = {c["name"]: c for c in calls}

    def chain(self, name: str):
        """`name` and its ancestors, innermost first."""
        seen = set()
        while name is not None and name in self.by_name and name not in seen:
            seen.add(name)
            yield name
            name = self.by_name[name]["parent"]


def _module_entries(plan, params: dict) -> list:
    calls = _Calls(plan.module_calls)
    nodes = plan.nodes
    entries = {c["name"]: {"name": c["name"], "fqn": c["fqn"], "call": c["call"], "type": c["type"],
                           "parent": c["parent"], "depth": c["depth"], "params": {}, "inputs": [], "outputs": [],
                           "forward": _empty_phase(), "backward": _empty_phase(), "optimizer_s": 0.0,
                           "activation_bytes": 0,
                           # Forward values backward reads: kept from forward, or recomputed in
                           # backward for recompute_s (the solver's choice, core/recompute.h).
                           "kept": {"count": 0, "bytes": 0},
                           "recomputed": {"count": 0, "bytes": 0, "seconds": 0.0},
                           "share": {}, "differs_from": None, "difference": ""}
               for c in calls.calls}
    members = defaultdict(list)  # call name -> IR indices made inside it (its sub-calls included)
    inside = [set() for _ in nodes]  # IR index -> the calls containing it
    read_by_backward = _read_by_backward(plan)
    for i, n in enumerate(nodes):
        if n.phase not in ("forward", "backward"):
            continue
        for name in calls.chain(n.module if n.module in calls.by_name else ""):
            e = entries[name]
            _add_node(e[n.phase], n)
            if n.phase == "forward":
                e["activation_bytes"] += n.bytes
                if n.recompute:  # bytes: of values backward reads (the others were never held)
                    r = e["recomputed"]
                    held = n.bytes if i in read_by_backward else 0
                    r["count"], r["bytes"], r["seconds"] = r["count"] + 1, r["bytes"] + held, r["seconds"] + n.recompute_s
                elif i in read_by_backward:
                    e["kept"]["count"] += 1
                    e["kept"]["bytes"] += n.bytes
            members[name].append(i)
            inside[i].add(name)

    # The optimizer's update of each parameter shard (train plans price it on the parameter's
    # node): counted in the calls whose module owns the parameter.
    by_fqn = defaultdict(list)
    for e in entries.values():
        by_fqn[e["fqn"]].append(e)
    for n in nodes:
        if n.phase == "input" and n.role == "param" and n.compute_s:
            parts = n.target.split(".")
            for k in range(len(parts)):  # "", "layers", "layers.0", ... : the module and its ancestors
                for e in by_fqn.get(".".join(parts[:k]), ()):
                    e["optimizer_s"] += n.compute_s

    # Inputs: tensors a call's forward nodes take from outside it (parameters and buffers
    # excluded); outputs: tensors its forward nodes make that forward nodes outside use.
    graph = plan.graph
    if graph is not None:
        state = {i for i, ir in enumerate(graph.nodes) if ir.op == "placeholder" and ir.role in ("param", "buffer")}
        users = defaultdict(list)
        for j, ir in enumerate(graph.nodes):
            for k, src in enumerate(_tensor_inputs(ir)):
                users[src].append((j, k))
        for name, idx in members.items():
            e, own = entries[name], set(idx)
            seen_in, seen_out = set(), set()
            for j in idx:
                if nodes[j].phase != "forward":
                    continue
                for k, src in enumerate(_tensor_inputs(graph.nodes[j])):
                    if src not in own and src not in state and src not in seen_in and k < len(nodes[j].inputs):
                        seen_in.add(src)
                        e["inputs"].append(nodes[j].inputs[k])
                for (u, _k) in users.get(j, ()):
                    if u not in own and nodes[u].phase in ("forward", "output") and j not in seen_out:
                        seen_out.add(j)
                        e["outputs"].extend(nodes[j].outputs[:1])

    for e in entries.values():
        prefix = e["fqn"] + "." if e["fqn"] else ""
        e["params"] = {k: v for k, v in params.items() if k.startswith(prefix)}

    s = plan.summary
    made = sum(n.bytes for n in nodes if n.phase == "forward")  # every activation of the step, once
    for e in entries.values():
        compute = e["forward"]["compute_s"] + e["backward"]["compute_s"] + e["optimizer_s"]
        comm = e["forward"]["comm_s"] + e["backward"]["comm_s"]
        e["share"] = {"compute": compute / s.compute_s if s.compute_s > 0 else 0.0,
                      "comm": comm / s.comm_s if s.comm_s > 0 else 0.0,
                      "memory": e["activation_bytes"] / made if made > 0 else 0.0}
    _compare_repeated_calls(entries, members, nodes)
    return [entries[c["name"]] for c in calls.calls]


def _read_by_backward(plan) -> set:
    """IR indices of the forward values a backward node reads."""
    graph, out = plan.graph, set()
    if graph is None:
        return out
    for j, ir in enumerate(graph.nodes):
        if j < len(plan.nodes) and plan.nodes[j].phase == "backward":
            out.update(_tensor_inputs(ir))
    return out


def _params(plan) -> dict:
    """Parameter placements; {} for a plan read from a file saved before placeholders were labelled."""
    try:
        return plan.param_placements()
    except ValueError:
        return {}


def _tensor_inputs(ir) -> list:
    """IR indices of a node's tensor arguments, in argument order (the IR encoding)."""
    out = []

    def walk(x):
        if isinstance(x, dict):
            if "t" in x and isinstance(x["t"], list):
                out.append(int(x["t"][0]))
                return
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(ir.args)
    walk(ir.kwargs)
    return out


def _compare_repeated_calls(entries: dict, members: dict, nodes: list) -> None:
    """A repeated call is compared with the module's first call, phase by phase, op by op.
    Calls whose traced ops differ (other shapes of arguments, or a gradient one call needs
    and the other not) are said to be traced differently; otherwise the strategies of
    corresponding ops are compared."""
    first = {}
    for name, e in entries.items():
        if e["call"] == 0:
            first[e["fqn"]] = name
    cost = lambda x: sum(x[p]["compute_s"] + x[p]["comm_s"] for p in ("forward", "backward"))  # noqa: E731
    for name, e in entries.items():
        base = first.get(e["fqn"])
        if e["call"] == 0 or base is None:
            continue
        notes = []
        for phase in ("forward", "backward"):
            a = [nodes[i] for i in members.get(base, []) if nodes[i].phase == phase]
            b = [nodes[i] for i in members.get(name, []) if nodes[i].phase == phase]
            if [n.op for n in a] != [n.op for n in b]:
                notes.append(f"{phase} traced differently ({len(b)} ops against {len(a)})")
                continue
            differ = sum(1 for x, y in zip(a, b) if (x.inputs, x.outputs) != (y.inputs, y.outputs))
            if differ:
                notes.append(f"{phase}: {differ} of {len(a)} ops planned differently")
        if not notes:
            continue
        delta = cost(e) - cost(entries[base])
        e["differs_from"] = base
        e["difference"] = (f"{'; '.join(notes)} from {base}; {'+' if delta >= 0 else '-'}{_time(abs(delta))} "
                           f"per step against it")


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def _layer_grid(plan, params: dict) -> dict:
    """Parameters (`params`: FQN -> spec) of the stack the model's layers live in, as a grid: one
    row per layer, one column per parameter name inside a layer.

    Candidates are groups of numbered sibling modules (layers.0, layers.1, ...). The stack is the
    group whose members hold the most parameters, then the most graph nodes (a block's inner
    Sequential of four modules numbers more siblings than the two blocks holding it, but holds
    less); on a tie the outer group wins. Names play no part."""
    groups = defaultdict(dict)  # prefix -> {number: fqn}
    for c in plan.module_calls:
        m = _NUMBERED.match(c["fqn"])
        if m and c["call"] == 0 and (m.group(1) == "" or m.group(1).endswith(".")):
            groups[m.group(1)][int(m.group(2))] = c["fqn"]
    groups = {k: v for k, v in groups.items() if len(v) >= 2}
    if not groups:
        return {"rows": [], "columns": [], "cells": []}
    group_of = {fqn: prefix for prefix, members in groups.items() for fqn in members.values()}

    def held(names) -> dict:  # group prefix -> how many of `names` lie inside its members
        count = defaultdict(int)
        for name in names:
            parts = name.split(".")
            for k in range(1, len(parts) + 1):
                prefix = group_of.get(".".join(parts[:k]))
                if prefix is not None:
                    count[prefix] += 1
        return count

    by_params, by_nodes = held(params), held(n.module for n in plan.nodes if n.module)

    def weight(item):
        prefix = item[0]
        return (by_params[prefix], by_nodes[prefix], -prefix.count("."), prefix)

    _, layers = max(groups.items(), key=weight)
    rows = [layers[k] for k in sorted(layers)]
    columns = []
    for row in rows:
        for name in params:
            if name.startswith(row + ".") and name[len(row) + 1:] not in columns:
                columns.append(name[len(row) + 1:])
    cells = [[params.get(f"{row}.{col}") for col in columns] for row in rows]
    return {"rows": rows, "columns": columns, "cells": cells}


def _graph_view(plan) -> list:
    first_forward = {}
    for n in plan.nodes:
        if n.phase == "forward" and n.seq_nr >= 0 and n.op not in _VIEW_OPS:
            first_forward.setdefault(n.seq_nr, n.name)
    for n in plan.nodes:  # seq_nr made only by views / detaches: name those
        if n.phase == "forward" and n.seq_nr >= 0:
            first_forward.setdefault(n.seq_nr, n.name)
    names = [n.name for n in plan.nodes]
    out = []
    for i, n in enumerate(plan.nodes):
        out.append({"index": i, "name": n.name, "op": n.op, "region": n.region, "module": n.module, "phase": n.phase,
                    "seq_nr": n.seq_nr,
                    "forward_node": first_forward.get(n.seq_nr) if n.phase == "backward" else None,
                    "inputs": list(n.inputs), "outputs": list(n.outputs), "compute_s": n.compute_s,
                    "comm_s": n.comm_s, "bytes": n.bytes, "num_strategies": n.num_strategies,
                    "redistributions": [{**r, "producer": names[r["producer"]]
                                         if isinstance(r.get("producer"), int) and r["producer"] < len(names)
                                         else r.get("producer")} for r in n.redistributions]})
    return out


_VIEW_OPS = {"aten.detach.default", "aten.t.default", "aten.view.default", "aten._unsafe_view.default",
             "aten.expand.default", "aten.alias.default"}


def _timeline(plan) -> dict:
    nodes, sizes = plan.summary.memory_timeline
    m = plan.summary.memory
    if len(nodes) > _MAX_TIMELINE_POINTS:  # keep each bucket's peak
        step = -(-len(nodes) // _MAX_TIMELINE_POINTS)
        pairs = [max(zip(sizes[k:k + step], nodes[k:k + step])) for k in range(0, len(nodes), step)]
        sizes, nodes = [p[0] for p in pairs], [p[1] for p in pairs]
    return {"node": list(nodes), "bytes": list(sizes), "baseline": m.parameters + m.optimizer_state}


def build_report(plan, title: str | None = None) -> dict:
    """The plan as a report document (see docs/user_guide.md, "Reading a plan")."""
    s = plan.summary
    mesh = "x".join(str(d) for d in plan.mesh_shape)
    root = next((c for c in plan.module_calls if c["name"] == ""), None)
    params = _params(plan)  # one pass; the module table and the layer grid both read it
    return {
        "format": REPORT_FORMAT,
        "title": title or f"{root['type'] if root else 'model'} on mesh {mesh} ({s.device})",
        "mesh": {"shape": list(plan.mesh_shape), "dim_names": list(plan.mesh_dim_names or ())},
        "summary": {"estimated_step_s": s.estimated_step_s, "compute_s": s.compute_s, "comm_s": s.comm_s,
                    "recompute_s": s.recompute_s,
                    "memory": {"parameters": s.memory.parameters, "gradients": s.memory.gradients,
                               "optimizer_state": s.memory.optimizer_state, "activations": s.memory.activations,
                               "peak": s.memory.peak},
                    "memory_limit": s.memory_limit, "memory_limit_source": s.memory_limit_source,
                    "solver": {"cost": s.solver.cost, "bound": s.solver.bound, "gap": s.solver.gap,
                               "seconds": s.solver.seconds, "status": s.solver.status},
                    "device": s.device, "mode": s.mode},
        "params": params,
        "modules": _module_entries(plan, params),
        "layers": _layer_grid(plan, params),
        "nodes": _graph_view(plan),
        "memory_timeline": _timeline(plan),
        "solver_progress": {"seconds": [p[0] for p in s.solver_progress], "cost": [p[1] for p in s.solver_progress],
                            "bound": [p[2] for p in s.solver_progress]},
    }


# ---- text --------------------------------------------------------------------------------

def _time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def _collectives(phase: dict) -> str:
    parts = [f"{k} x{v['count']} ({_time(v['seconds'])})" for k, v in sorted(phase["collectives"].items())]
    return ", ".join(parts) or "no collective"  # comm without one: local chunks and copies


def _specs(specs: list, limit: int = 4) -> str:
    shown = [x or "-" for x in specs[:limit]]
    return ",".join(shown) + (f",+{len(specs) - limit}" if len(specs) > limit else "") or "-"


def format_modules(report: dict, max_depth: int | None = None) -> str:
    """One block per module call, in call order, indented by depth."""
    lines = [f"Modules of {report['title']} (per call; compute/comm per step on one rank; shares of the step):"]
    for e in report["modules"]:
        if max_depth is not None and e["depth"] > max_depth:
            continue
        pad = "  " * (e["depth"] + 1)
        f, b, sh = e["forward"], e["backward"], e["share"]
        lines.append(f"{pad}{e['name'] or '<root>'} ({e['type']})  in {_specs(e['inputs'])} -> out "
                     f"{_specs(e['outputs'])}")
        lines.append(f"{pad}  forward  compute {_time(f['compute_s'])}, comm {_time(f['comm_s'])}: {_collectives(f)}")
        lines.append(f"{pad}  backward compute {_time(b['compute_s'])}, comm {_time(b['comm_s'])}: {_collectives(b)}")
        if e.get("optimizer_s"):
            lines.append(f"{pad}  optimizer step on its parameter shards {_time(e['optimizer_s'])}")
        kept, rc = e.get("kept"), e.get("recomputed")
        if kept and (kept["count"] or rc["count"]):
            line = f"{pad}  for backward: kept {kept['count']} values ({_bytes(kept['bytes'])})"
            if rc["count"]:
                line += (f", recomputed {rc['count']} ({_bytes(rc['bytes'])} not held, "
                         f"{_time(rc['seconds'])} more compute)")
            lines.append(line)
        lines.append(f"{pad}  share: compute {100 * sh['compute']:.1f}%, comm {100 * sh['comm']:.1f}%, activations "
                     f"made {_bytes(e['activation_bytes'])} ({100 * sh['memory']:.1f}% of the step's)")
        own = {k: v for k, v in e["params"].items() if k.rpartition(".")[0] == e["fqn"]}
        for k, v in own.items():
            lines.append(f"{pad}  param {k}: {v}")
        if e["difference"]:
            lines.append(f"{pad}  DIFFERS: {e['difference']}")
    return "\n".join(lines)


def _short_region(region: str) -> str:
    """local_map:pkg.module.function:line -> local_map:function:line (the column stays narrow)."""
    if region.startswith("local_map:"):
        return "local_map:" + region[len("local_map:"):].rsplit(".", 1)[-1]
    return region or "-"


def format_graph(report: dict, limit: int | None = None, region: str | None = None) -> str:
    """Every node in graph order (or those of one region): strategy, costs, redistributions;
    backward nodes name the forward node they differentiate."""
    lines = [f"{'#':>5} {'node':<24} {'op':<30} {'region':<28} {'phase':<8} {'inputs -> outputs':<30} "
             f"{'compute':>10} {'comm':>10}"]
    rows = [n for n in report["nodes"] if region is None or n["region"] == region]
    for n in rows[:limit]:
        io = f"{_specs(n['inputs'], 3)} -> {_specs(n['outputs'], 2)}"
        lines.append(f"{n['index']:>5} {n['name']:<24.24} {n['op']:<30.30} {_short_region(n['region']):<28.28} "
                     f"{n['phase']:<8} {io:<30} {_time(n['compute_s']):>10} {_time(n['comm_s']):>10}")
        if n["forward_node"]:
            lines.append(f"{'':>6}  differentiates {n['forward_node']} (autograd seq {n['seq_nr']})")
        for r in n["redistributions"]:
            lines.append(f"{'':>6}  input {r['input']} from {r['producer']}: {r['from']} -> {r['to']} "
                         f"({_time(r['seconds'])}: {', '.join(r['collectives']) or 'local'})")
    if limit is not None and len(rows) > limit:
        lines.append(f"  ... {len(rows) - limit} more nodes")
    return "\n".join(lines)


# ---- one choice explained ------------------------------------------------------------------

def _node_index(plan, name: str) -> int:
    for i, n in enumerate(plan.nodes):
        if n.name == name:
            return i
    if plan.graph is not None:
        for i, ir in plan.graph.placeholders():
            if ir.target == name and ir.role in ("param", "buffer"):
                return i
    raise ValueError(f"explain: no node or parameter named {name!r} in this plan; expected an IR node name "
                     f"(see format_graph) or a parameter FQN (see plan.param_placements())")


def explain(plan, name: str) -> dict:
    """The strategies of one node (a node name or a parameter FQN), each priced with the
    rest of the plan kept: compute, communication in and out, bytes, and the deltas
    against the chosen one. A local view: core/explain.h says what it leaves out."""
    if plan.graph is None or not plan.options:
        raise ValueError("explain: this plan was read from a file; plan the model in this process to explain it")
    from . import _C  # noqa: PLC0415

    i = _node_index(plan, name)
    doc = json.loads(_C.explain(plan.graph.to_json(), plan.options, plan.to_json(), i))
    chosen = next(a for a in doc["alternatives"] if a["chosen"])
    for a in doc["alternatives"]:
        a["total_s"] = a["compute_s"] + a["comm_in_s"] + a["comm_out_s"] if a["possible"] else float("inf")
        a["delta"] = {"compute_s": a["compute_s"] - chosen["compute_s"],
                      "comm_s": a["comm_in_s"] + a["comm_out_s"] - chosen["comm_in_s"] - chosen["comm_out_s"],
                      "bytes": a["bytes"] - chosen["bytes"]}
    doc["region"] = plan.nodes[i].region
    doc["query"] = name
    return doc


def format_explanation(ex: dict, limit: int = 12) -> str:
    lines = [f"{ex['query']}: node {ex['name']} ({ex['op']}, {ex['region'] or 'no module'}), "
             f"{len(ex['alternatives'])} strategies; deltas against the chosen one, everything else as planned:",
             f"  {'inputs -> outputs':<40} {'compute':>10} {'comm in':>10} {'comm out':>10} {'bytes':>11} "
             f"{'d time':>11} {'d bytes':>11}"]
    for a in ex["alternatives"][:limit]:
        io = f"{_specs(a['inputs'], 3)} -> {_specs(a['outputs'], 2)}"
        if not a["possible"]:
            lines.append(f"  {io:<40} impossible: {a.get('why_not', '')}")
            continue
        d = a["delta"]
        dt = d["compute_s"] + d["comm_s"]
        mark = "chosen" if a["chosen"] else f"{'+' if dt >= 0 else '-'}{_time(abs(dt))}"
        lines.append(f"  {io:<40} {_time(a['compute_s']):>10} {_time(a['comm_in_s']):>10} "
                     f"{_time(a['comm_out_s']):>10} {_bytes(a['bytes']):>11} {mark:>11} "
                     f"{('+' if d['bytes'] >= 0 else '-') + _bytes(abs(d['bytes'])) if not a['chosen'] else '':>11}")
    if len(ex["alternatives"]) > limit:
        lines.append(f"  ... {len(ex['alternatives']) - limit} more")
    return "\n".join(lines)


# ---- a plan that replicates everything -----------------------------------------------------

def replication_reason(plan) -> str | None:
    """One line saying why `plan` replicates everything, or None when it shards anything (or was
    read from a file). C++ (core/replication_reason.h) prices the ops with the most compute in
    their sharded strategies, the rest of the plan kept, and names the one closest to paying off."""
    if plan.graph is None or not plan.options:
        return None
    from . import _C  # noqa: PLC0415

    r = json.loads(_C.replication_reason(plan.graph.to_json(), plan.options, plan.to_json()))
    if not r["all_replicated"]:
        return None
    head = "Everything is replicated"
    if r["node"] < 0:
        return f"{head}: no op has a sharded strategy on this mesh"
    saved, added = r["compute_saved_s"], r["comm_added_s"]
    alt = f"{r['name']} ({r['op']}) as {_specs(r['inputs'], 3)} -> {_specs(r['outputs'], 2)}"
    if added >= saved:
        return (f"{head}: sharding costs more communication than the compute it saves; the closest alternative, "
                f"{alt}, saves {_time(saved)} of compute and adds {_time(added)} of communication per step")
    return (f"{head}: the best local alternative, {alt}, saves {_time(saved)} of compute for {_time(added)} of "
            f"communication, but sharding it forces dearer choices elsewhere in the step")


# ---- files ---------------------------------------------------------------------------------

def write_report_json(plan, path) -> dict:
    report = build_report(plan)
    with open(path, "w") as f:
        json.dump(report, f)
    return report


def write_report_html(plan, path, title: str | None = None) -> dict:
    """A self-contained page (no network needed): placement grid, per-module bars, the memory
    timeline against the budget, the solver's progress, the module table."""
    from ._html_report import write_html  # noqa: PLC0415

    report = build_report(plan, title)
    write_html(report, path)
    return report
