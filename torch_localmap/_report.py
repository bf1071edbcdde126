"""Human-readable plan tables (the demo and `python -m torch_localmap plan`)."""
from __future__ import annotations


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:10.2f} us"


def _memory_unit(size: int) -> tuple:
    """(bytes per unit, unit name) for `size`: the unit every figure of one memory line is in."""
    return (2**30, "GiB") if size >= 2**30 else (2**20, "MiB") if size >= 2**20 else (2**10, "KiB")


def _in_unit(size: int, unit: tuple) -> str:
    """`size` in `unit`, two decimals, or three significant digits where two decimals would show 0.00."""
    v = size / unit[0]
    text = f"{v:.2f}" if abs(v) >= 0.01 or v == 0 else f"{v:.3g}"
    return f"{text} {unit[1]}"


def memory_breakdown(summary) -> str:
    """The estimated peak per rank and what it is made of, in the peak's unit."""
    m = summary.memory
    u = _memory_unit(m.peak)
    live = m.peak - m.parameters - m.optimizer_state
    return (f"Memory per rank: estimated peak {_in_unit(m.peak, u)} = parameters {_in_unit(m.parameters, u)} + "
            f"optimizer state {_in_unit(m.optimizer_state, u)} + live values {_in_unit(live, u)} (activations "
            f"{_in_unit(m.activations, u)}, gradients up to {_in_unit(m.gradients, u)})")


def memory_verdict(summary) -> tuple:
    """(fits, one line): the estimated peak (the one peak printed) against the memory limit, in the
    peak's unit; fits when there is no limit."""
    peak, limit = summary.memory.peak, summary.memory_limit
    if limit <= 0:
        return True, f"Memory limit: none ({summary.memory_limit_source or 'memory_limit=None'})"
    if peak <= limit:  # the limit may be far larger: its own unit
        return True, (f"Memory: fits: estimated peak {_in_unit(peak, _memory_unit(peak))}/rank = "
                      f"{100 * peak / limit:.1f}% of the limit of {_in_unit(limit, _memory_unit(limit))}/rank "
                      f"({summary.memory_limit_source})")
    u = _memory_unit(peak)
    return False, (f"Memory: DOES NOT FIT: estimated peak {_in_unit(peak, u)}/rank is {_in_unit(peak - limit, u)} over "
                   f"the limit of {_in_unit(limit, u)}/rank ({summary.memory_limit_source}); expected a larger mesh, "
                   f"a smaller batch or a higher limit")


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
                 f" + communication {_us(s.comm_s).strip()}")
    lines.append(memory_breakdown(s))
    lines.append(memory_verdict(s)[1])
    lines.append(f"Solver: cost={sol.cost} bound={sol.bound:.6g} gap={100 * sol.gap:.3f}% "
                 f"({sol.status}, {sol.seconds:.3f} s)")
    blocks = s.blocks or {}
    if blocks.get("repeated", 0) > 1:
        gain = blocks.get("asymmetry_gain_s", 0)
        lines.append(f"Repeated blocks: {blocks['repeated']}, " + (
            "placed alike" if blocks.get("alike", True) else
            "placed differently: no plan placing them alike fits the memory limit" if gain < 0 else
            f"placed differently: {_us(gain).strip()} per step cheaper than the best plan placing them alike"))
        if blocks.get("folded"):
            lines.append(f"Folded first solve: {blocks['folded']}")
    if sol.note:
        lines.append(f"Solver note: {sol.note.splitlines()[0]}")
    if plan.measurements:
        m = plan.measurements
        turns = f"{m['steps']} training steps in each of {m['rounds']} rounds" if "rounds" in m else \
            f"{m['steps']} training steps each"  # a plan saved before the candidates took turns
        lines.append(f"Measured on the mesh ({turns}; kept: {m['kept']}):")
        for c in m["candidates"]:
            if "skipped" in c:
                lines.append(f"  {c['candidate']:<14} skipped: {c['skipped']}")
            else:
                lines.append(f"  {c['candidate']:<14} measured {_us(c['measured_step_s']).strip()}, estimated "
                             f"{_us(c['estimated_step_s']).strip()}")
    if s.fallback_ops:
        lines.append(f"Replicate-only fallback for: {', '.join(s.fallback_ops)}")
    from .report import replication_reason  # noqa: PLC0415

    why = replication_reason(plan)
    if why:
        lines.append(why)
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
