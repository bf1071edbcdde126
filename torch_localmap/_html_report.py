"""The plan report as one self-contained HTML page: data, style and drawing code inline,
nothing fetched, so it opens from a file on a machine with no network.

The page draws four SVG charts from the report document (report.build_report): the
parameters' placements per layer, compute and communication per module call, the memory
timeline of a step against the budget, and the solver's cost and bound over time. Each
chart writes how many shapes it drew into its `data-shapes` attribute and the page sets
`data-status` on <body> ("ok", or the first script error), so a headless browser can
check that it rendered (test/python/test_report_html.py).
"""
from __future__ import annotations

import html
import json
import math

from .report import _bytes

_STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2330; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 15px; margin: 28px 0 6px; }
.sub { color: #5b6475; } .warn { color: #b3261e; font-weight: 600; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0; }
.card { border: 1px solid #d8dce4; border-radius: 6px; padding: 8px 12px; min-width: 150px; }
.card b { display: block; font-size: 16px; }
svg.chart { display: block; border: 1px solid #e3e6ec; border-radius: 4px; background: #fcfcfd; }
svg text { font: 11px system-ui, sans-serif; fill: #1d2330; }
table { border-collapse: collapse; font-size: 12px; } td, th { border-bottom: 1px solid #e3e6ec;
  padding: 3px 8px; text-align: left; vertical-align: top; } th { background: #f3f4f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; }
"""

# Drawing code. Plain DOM + SVG; every chart tolerates empty data (draws a note instead).
_SCRIPT = r"""
"use strict";
const errors = [];
window.addEventListener("error", e => { errors.push(String(e.message || e)); document.body.dataset.status =
  "error: " + errors[0]; });
const R = JSON.parse(document.getElementById("report-data").textContent);
const NS = "http://www.w3.org/2000/svg";
function el(parent, tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  parent.appendChild(e); return e;
}
function fmtTime(s) { return s >= 1 ? s.toFixed(2) + " s" : s >= 1e-3 ? (s * 1e3).toFixed(2) + " ms"
  : (s * 1e6).toFixed(1) + " us"; }
function fmtBytes(b) { const u = [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]];
  for (const [n, v] of u) if (Math.abs(b) >= v) return (b / v).toFixed(2) + " " + n; return b + " B"; }
function hue(text) { let h = 0; for (const c of text) h = (h * 31 + c.charCodeAt(0)) % 360; return h; }
function placementColor(p) { if (!p) return "#eee"; if (/^R+$/.test(p)) return "#d9dde6";
  return "hsl(" + hue(p) + ",55%,72%)"; }
function note(svg, text) { el(svg, "text", {x: 12, y: 24}, text); svg.setAttribute("height", 40); }
function done(svg, shapes) { svg.dataset.shapes = String(shapes); }

function axes(svg, x0, y0, w, h, ymin, ymax, yfmt, xlabel) {
  el(svg, "line", {x1: x0, y1: y0 + h, x2: x0 + w, y2: y0 + h, stroke: "#888"});
  el(svg, "line", {x1: x0, y1: y0, x2: x0, y2: y0 + h, stroke: "#888"});
  for (let k = 0; k <= 4; k++) {
    const y = y0 + h - (h * k) / 4;
    el(svg, "line", {x1: x0, y1: y, x2: x0 + w, y2: y, stroke: "#eceef2"});
    el(svg, "text", {x: x0 - 6, y: y + 4, "text-anchor": "end"}, yfmt(ymin + ((ymax - ymin) * k) / 4));
  }
  el(svg, "text", {x: x0 + w / 2, y: y0 + h + 30, "text-anchor": "middle"}, xlabel);
}

function xticks(svg, px, xs, y) {
  const lo = xs[0], hi = xs[xs.length - 1];
  for (let k = 0; k <= 4; k++) { const v = lo + ((hi - lo) * k) / 4;
    el(svg, "text", {x: px(v), y: y, "text-anchor": "middle"}, Number.isInteger(v) ? String(v) : v.toPrecision(3)); }
}

function drawGrid() {
  const svg = document.getElementById("chart-grid"), g = R.grid;
  if (!g.rows.length) { note(svg, "no parameters"); return done(svg, 0); }
  const cw = Math.max(60, Math.min(140, 860 / g.columns.length)), ch = 18, left = 160, top = 120;
  svg.setAttribute("width", left + cw * g.columns.length + 20);
  svg.setAttribute("height", top + ch * g.rows.length + 10);
  let shapes = 0;
  g.columns.forEach((c, j) => el(svg, "text", {x: 0, y: 0, transform: "translate(" + (left + j * cw + cw / 2) +
    "," + (top - 6) + ") rotate(-40)"}, c));
  g.rows.forEach((r, i) => {
    el(svg, "text", {x: left - 6, y: top + i * ch + 13, "text-anchor": "end"}, r);
    g.columns.forEach((c, j) => {
      const p = g.cells[i][j];
      const rect = el(svg, "rect", {x: left + j * cw, y: top + i * ch, width: cw - 2, height: ch - 2,
        fill: placementColor(p)});
      el(rect, "title", {}, r + "." + c + ": " + (p || "none")); shapes++;
      if (p) el(svg, "text", {x: left + j * cw + 4, y: top + i * ch + 13}, p);
    });
  });
  done(svg, shapes);
}

function drawBars() {
  const svg = document.getElementById("chart-bars");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const depth = +document.getElementById("depth").value;
  const mods = R.modules.filter(m => m.depth === depth);
  if (!mods.length) { note(svg, "no module calls at this depth"); return done(svg, 0); }
  const parts = [["forward compute", m => m.forward.compute_s, "#4c78a8"],
    ["backward compute", m => m.backward.compute_s, "#9ecae9"],
    ["forward comm", m => m.forward.comm_s, "#f58518"], ["backward comm", m => m.backward.comm_s, "#ffbf79"]];
  const total = m => parts.reduce((a, p) => a + p[1](m), 0);
  const vmax = Math.max(...mods.map(total), 1e-12);
  const left = 170, width = 760, bh = 14, top = 10;
  svg.setAttribute("width", left + width + 110); svg.setAttribute("height", top + mods.length * (bh + 4) + 10);
  let shapes = 0;
  mods.forEach((m, i) => {
    const y = top + i * (bh + 4);
    el(svg, "text", {x: left - 6, y: y + 11, "text-anchor": "end"}, m.name || "<root>");
    let x = left;
    for (const [label, f, color] of parts) {
      const w = (width * f(m)) / vmax;
      if (w <= 0) continue;
      const r = el(svg, "rect", {x: x, y: y, width: Math.max(w, 0.5), height: bh, fill: color});
      el(r, "title", {}, (m.name || "<root>") + " " + label + ": " + fmtTime(f(m))); x += w; shapes++;
    }
    el(svg, "text", {x: x + 6, y: y + 11}, fmtTime(total(m)) + (m.differs_from ? "  (differs from " +
      m.differs_from + ")" : ""));
  });
  done(svg, shapes);
}

function drawLine(svg, series, xs, ymin, ymax, yfmt, xlabel, extra) {
  const x0 = 80, y0 = 14, w = 820, h = 230, xmax = Math.max(xs[xs.length - 1], 1e-12);
  const xmin = xs[0];
  const px = x => x0 + (w * (x - xmin)) / Math.max(xmax - xmin, 1e-12), py = y => y0 + h - (h * (y - ymin)) / Math.max(ymax - ymin, 1e-30);
  svg.setAttribute("width", x0 + w + 20); svg.setAttribute("height", y0 + h + 42);
  axes(svg, x0, y0, w, h, ymin, ymax, yfmt, xlabel);
  xticks(svg, px, xs, y0 + h + 14);
  let shapes = 0;
  for (const [ys, color, step] of series) {
    let d = "";
    ys.forEach((y, k) => { if (!Number.isFinite(y)) return;
      const X = px(xs[k]).toFixed(1), Y = py(y).toFixed(1);
      d += d === "" ? "M" + X + " " + Y : (step ? "H" + X + "V" + Y : "L" + X + " " + Y); });
    if (d) { el(svg, "path", {d: d, fill: "none", stroke: color, "stroke-width": 1.6}); shapes++; }
    if (ys.length === 1 && Number.isFinite(ys[0])) { el(svg, "circle", {cx: px(xs[0]), cy: py(ys[0]), r: 3, fill: color});
      shapes++; }
  }
  if (extra) shapes += extra(px, py, x0, w);
  return shapes;
}

function drawMemory() {
  const svg = document.getElementById("chart-memory"), t = R.memory_timeline, s = R.summary;
  if (!t.bytes.length) { note(svg, "no memory timeline in this plan"); return done(svg, 0); }
  const xs = t.node, ys = t.bytes.map(b => t.baseline + b);
  // A budget far above the step's use would flatten the curve: then it is named, not drawn.
  const limit = s.memory_limit, peak = Math.max(...ys), onScale = limit > 0 && limit < 4 * peak;
  const ymax = Math.max(peak, onScale ? limit : 0) * 1.08;
  const shapes = drawLine(svg, [[ys, "#4c78a8", false]], xs, 0, ymax, fmtBytes,
    "graph node (execution order; backward to the right)", (px, py, x0, w) => {
      let n = 0;
      el(svg, "line", {x1: x0, x2: x0 + w, y1: py(t.baseline), y2: py(t.baseline), stroke: "#54a24b",
        "stroke-dasharray": "4 3"}); n++;
      el(svg, "text", {x: x0 + 6, y: py(t.baseline) - 4}, "parameters + optimizer state " + fmtBytes(t.baseline));
      if (limit > 0 && !onScale) el(svg, "text", {x: x0 + w - 4, y: 28, "text-anchor": "end"}, "budget " +
        fmtBytes(limit) + " (off this scale: the step uses " + (100 * peak / limit).toFixed(1) + "% of it)");
      if (onScale) { el(svg, "line", {x1: x0, x2: x0 + w, y1: py(limit), y2: py(limit), stroke: "#b3261e",
        "stroke-dasharray": "6 3"}); n++;
        el(svg, "text", {x: x0 + w - 4, y: py(limit) - 4, "text-anchor": "end"}, "budget " + fmtBytes(limit)); }
      const k = ys.indexOf(Math.max(...ys));
      el(svg, "circle", {cx: px(xs[k]), cy: py(ys[k]), r: 4, fill: "#b3261e"}); n++;
      el(svg, "text", {x: px(xs[k]) + 6, y: py(ys[k]) - 6}, "peak " + fmtBytes(ys[k]));
      return n;
    });
  done(svg, shapes);
}

function drawProgress() {
  const svg = document.getElementById("chart-progress"), p = R.solver_progress;
  if (!p.seconds.length) { note(svg, "no solver progress recorded"); return done(svg, 0); }
  const finite = p.cost.concat(p.bound).filter(v => Number.isFinite(v) && v > 0);
  // Zoomed on the band between the bound and the cost: their gap is what a reader looks for.
  const hi = Math.max(...finite, 1e-12), lo = Math.min(...finite, hi), pad = Math.max((hi - lo) * 0.1, hi * 1e-4);
  done(svg, drawLine(svg, [[p.cost, "#4c78a8", true], [p.bound, "#e45756", true]], p.seconds, Math.max(lo - pad, 0),
    hi + pad, fmtTime,
    "solver time (s)"));
}

function fillModules() {
  const body = document.querySelector("#modules tbody");
  for (const m of R.modules) {
    const tr = document.createElement("tr");
    const cells = [(m.name || "<root>"), m.type, m.inputs.slice(0, 3).join(", "), m.outputs.slice(0, 2).join(", "),
      fmtTime(m.forward.compute_s + m.backward.compute_s), fmtTime(m.forward.comm_s + m.backward.comm_s),
      Object.keys(m.forward.collectives).concat(Object.keys(m.backward.collectives)).filter((v, i, a) =>
        a.indexOf(v) === i).join(", "), fmtBytes(m.activation_bytes), m.difference];
    cells.forEach((c, k) => { const td = document.createElement("td"); td.textContent = c;
      if (k === 0) td.style.paddingLeft = (8 + 14 * m.depth) + "px"; if (k >= 4 && k <= 7 && k !== 6)
        td.className = "num"; tr.appendChild(td); });
    body.appendChild(tr);
  }
}

function main() {
  const depth = document.getElementById("depth"), maxDepth = Math.max(0, ...R.modules.map(m => m.depth));
  for (let d = 0; d <= maxDepth; d++) { const o = document.createElement("option"); o.value = d;
    o.textContent = d === 0 ? "the whole model" : "depth " + d; depth.appendChild(o); }
  depth.value = String(Math.min(1, maxDepth)); depth.addEventListener("change", drawBars);
  drawGrid(); drawBars(); drawMemory(); drawProgress(); fillModules();
  if (!errors.length) document.body.dataset.status = "ok";
}
try { main(); } catch (e) { errors.push(String(e)); document.body.dataset.status = "error: " + e; }
"""


def _grid(report: dict) -> dict:
    """The layer grid, or (a model without numbered layers) one row per module owning parameters."""
    if report["layers"]["rows"]:
        return report["layers"]
    params = report.get("params") or {}
    rows, columns = [], []
    for fqn in params:
        owner, _, leaf = fqn.rpartition(".")
        if owner not in rows:
            rows.append(owner)
        if leaf not in columns:
            columns.append(leaf)
    cells = [[params.get(f"{r}.{c}" if r else c) for c in columns] for r in rows]
    return {"rows": [r or "<root>" for r in rows], "columns": columns, "cells": cells}


def _card(label: str, value: str) -> str:
    return f'<div class="card">{html.escape(label)}<b>{html.escape(value)}</b></div>'


def _fmt_time(s: float) -> str:
    return f"{s:.3f} s" if s >= 1 else f"{s * 1e3:.3f} ms"


def render_html(report: dict) -> str:
    s = report["summary"]
    data = {k: report[k] for k in ("title", "summary", "modules", "memory_timeline", "solver_progress")}
    data["grid"] = _grid(report)
    data["solver_progress"] = {k: [v if math.isfinite(v) else None for v in vals]  # JSON has no inf
                               for k, vals in report["solver_progress"].items()}
    # "<" escaped inside the JSON so no string in it can close the <script> element.
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    mem, limit = s["memory"], s["memory_limit"]
    over = limit > 0 and mem["peak"] > limit
    cards = [
        _card("estimated step", _fmt_time(s["estimated_step_s"])),
        _card("compute / communication", f"{_fmt_time(s['compute_s'])} / {_fmt_time(s['comm_s'])}"),
        _card("peak memory per rank", _bytes(mem["peak"]) + (f" of {_bytes(limit)}" if limit > 0 else "")),
        _card("solver", f"gap {100 * s['solver']['gap']:.3f}% ({s['solver']['status']}, "
                        f"{s['solver']['seconds']:.1f} s)"),
    ]
    mesh = "x".join(str(d) for d in report["mesh"]["shape"])
    names = ", ".join(report["mesh"]["dim_names"])
    warn = (f'<p class="warn">The estimated peak is above the memory budget ({html.escape(s["memory_limit_source"])}).'
            f"</p>" if over else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(report['title'])}</title>
<style>{_STYLE}</style></head>
<body data-status="loading">
<h1>{html.escape(report['title'])}</h1>
<div class="sub">mesh {mesh}{' (' + html.escape(names) + ')' if names else ''}, cost model {html.escape(s['device'])},
{html.escape(s['mode'])} step; every figure is the planner's estimate per rank</div>
<div class="cards">{''.join(cards)}</div>{warn}
<h2>Parameter placements per layer</h2>
<div class="sub">one placement per mesh dimension: S(d) shards tensor dim d, R replicates; same colour, same
placement</div>
<svg class="chart" id="chart-grid" data-chart="placements"></svg>
<h2>Compute and communication per module call</h2>
<div class="legend"><span><i style="background:#4c78a8"></i>forward compute</span><span><i
style="background:#9ecae9"></i>backward compute</span><span><i style="background:#f58518"></i>forward comm</span><span><i
style="background:#ffbf79"></i>backward comm</span> <label>modules at <select id="depth"></select></label></div>
<svg class="chart" id="chart-bars" data-chart="modules"></svg>
<h2>Memory during one step</h2>
<div class="sub">live activations, gradients and redistribution buffers on top of parameters and optimizer state,
against the budget the plan was made under</div>
<svg class="chart" id="chart-memory" data-chart="memory"></svg>
<h2>Solver progress</h2>
<div class="legend"><span><i style="background:#4c78a8"></i>best plan's cost (estimated step)</span><span><i
style="background:#e45756"></i>proven lower bound</span></div>
<svg class="chart" id="chart-progress" data-chart="progress"></svg>
<h2>Module calls</h2>
<table id="modules"><thead><tr><th>call</th><th>type</th><th>inputs</th><th>outputs</th><th>compute</th>
<th>comm</th><th>collectives</th><th>activations</th><th>differs</th></tr></thead><tbody></tbody></table>
<script type="application/json" id="report-data">{payload}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


def write_html(report: dict, path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(report))
