"""Human-readable plan tables (the demo and `python -m torch_localmap plan`)."""
from __future__ import annotations


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:10.2f} us"


def format_plan(plan, max_ops: int = 40) -> str:
    s = plan.summary
    lines = ["", "Parameters (placement per mesh dim):"]
    for name, spec in plan.param_placements().items():
        lines.append(f"  {name:<32} {spec}")
    lines.append("")
    lines.append(f"Ops ({len(plan.nodes)} nodes; showing those with cost, largest first):")
    lines.append(f"  {'node':<24} {'op':<34} {'inputs -> outputs':<34} {'compute':>13} {'comm':>13}")
    rows = [n for n in plan.nodes if n.op != "placeholder" and (n.compute_s > 0 or n.comm_s > 0)]
    rows.sort(key=lambda n: -(n.compute_s + n.comm_s))
    for n in rows[:max_ops]:
        io = f"{','.join(x or '-' for x in n.inputs)} -> {','.join(n.outputs)}"
        lines.append(f"  {n.name:<24} {n.op:<34} {io:<34} {_us(n.compute_s)} {_us(n.comm_s)}")
    if len(rows) > max_ops:
        lines.append(f"  ... {len(rows) - max_ops} more")
    sol = s.solver
    lines.append("")
    lines.append(f"Estimated step time {_us(s.estimated_step_s).strip()} = compute {_us(s.compute_s).strip()}"
                 f" + communication {_us(s.comm_s).strip()}; peak memory {s.peak_bytes / 2**20:.2f} MiB/rank")
    lines.append(f"Memory estimate: {s.memory.describe()}")
    if s.memory_limit > 0:
        use = s.memory.peak / s.memory_limit
        lines.append(f"Memory limit: {s.memory_limit / 2**30:.2f} GiB/rank ({s.memory_limit_source}); estimated peak "
                     f"{s.memory.peak / 2**30:.2f} GiB = {100 * use:.1f}% of it")
    else:
        lines.append(f"Memory limit: {s.memory_limit_source or 'none'}")
    lines.append(f"Solver: cost={sol.cost} bound={sol.bound:.6g} gap={100 * sol.gap:.3f}% "
                 f"({sol.status}, {sol.seconds:.3f} s)")
    if sol.note:
        lines.append(f"Solver note: {sol.note.splitlines()[0]}")
    if s.fallback_ops:
        lines.append(f"Replicate-only fallback for: {', '.join(s.fallback_ops)}")
    return "\n".join(lines)


def format_comparison(plan, others: dict) -> str:
    base = plan.summary.estimated_step_s
    lines = ["", "Same cost model, other plans:",
             f"  {'plan':<52} {'step time':>14} {'vs ours':>9}",
             f"  {'torch_localmap (solved)':<52} {_us(base)} {1.0:>8.2f}x"]
    for label, p in others.items():
        t = p.summary.estimated_step_s
        lines.append(f"  {label:<52} {_us(t)} {t / base if base > 0 else float('inf'):>8.2f}x")
    return "\n".join(lines)
