"""The HTML report in a real browser (issue 18): headless Chromium (Debian's `chromium`,
installed by `make test`) loads the page from a file with no network, runs its script
without errors, and draws every chart; the screenshot is a picture, not a blank page."""
import os
import re
import shutil
import subprocess

import pytest
import torch

from torch_localmap import models
from torch_localmap import report as R
from torch_localmap.plan import plan_module

CHARTS = ("placements", "modules", "memory", "progress")


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("headless Chromium not found: expected Debian's 'chromium' package (make test installs it: "
                "apt-get install chromium)")


def _browse(page, *extra) -> subprocess.CompletedProcess:
    # --no-sandbox: the tests run as root in a container; no network is needed or used.
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--hide-scrollbars", "--virtual-time-budget=10000", *extra, page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(page.parent)})


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    cfg = models.tiny_config("llama")
    cfg = type(cfg)(dim=128, n_layers=6, n_heads=4, n_kv_heads=2, ffn_dim=256, vocab_size=512, seq_len=32)
    with torch.device("meta"):
        model, example = models.build("llama", cfg, batch=8)
    plan = plan_module(model, (2, 2), example, time_limit=3)
    path = tmp_path_factory.mktemp("html") / "plan.html"
    report = R.write_report_html(plan, path)
    return path, report


def test_the_page_is_self_contained(page):
    path, _ = page
    text = path.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)  # nothing fetched
    assert "</script>" not in text.split('id="report-data">', 1)[1].split("</script>", 1)[0]


def test_chromium_runs_the_script_without_errors_and_draws_every_chart(page):
    path, report = page
    r = _browse(path, "--dump-dom")
    assert r.returncode == 0, r.stderr[-2000:]
    body = re.search(r"<body[^>]*>", r.stdout).group(0)
    assert 'data-status="ok"' in body, body
    shapes = {m.group(1): int(m.group(2)) for m in
              re.finditer(r'<svg[^>]*data-chart="(\w+)"[^>]*data-shapes="(\d+)"', r.stdout)}
    assert set(shapes) == set(CHARTS), shapes
    grid = report["layers"]
    assert shapes["placements"] == len(grid["rows"]) * len(grid["columns"]) > 0  # one cell per layer x parameter
    assert shapes["modules"] > 0 and shapes["memory"] >= 3 and shapes["progress"] >= 1
    rows = re.findall(r"<tr>", r.stdout.split('id="modules"', 1)[1])
    assert len(rows) == len(report["modules"]) + 1  # the header and one row per module call


def test_chromium_screenshot_is_a_drawn_page(page, tmp_path):
    from PIL import Image

    path, _ = page
    png = tmp_path / "shot.png"
    r = _browse(path, f"--screenshot={png}", "--window-size=1200,1600")
    assert r.returncode == 0 and png.exists(), r.stderr[-2000:]
    image = Image.open(png).convert("RGB")
    assert image.size == (1200, 1600)
    colours = image.getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 50  # text, bars, lines: not a blank or single-colour page


def test_a_broken_report_shows_as_a_script_error(tmp_path):
    """The check above can fail: a page whose data breaks the drawing code says so."""
    from torch_localmap._html_report import render_html

    bad = {"title": "t", "mesh": {"shape": [2], "dim_names": []},
           "summary": {"estimated_step_s": 1.0, "compute_s": 1.0, "comm_s": 0.0, "memory_limit": 0,
                       "memory_limit_source": "", "device": "H100", "mode": "train",
                       "memory": {"peak": 1, "parameters": 0, "optimizer_state": 0},
                       "solver": {"gap": 0.0, "status": "optimal", "seconds": 0.1}},
           "modules": [{"name": "", "depth": 0}], "params": {},  # a module entry without its figures
           "layers": {"rows": [], "columns": [], "cells": []},
           "memory_timeline": {"node": [], "bytes": [], "baseline": 0},
           "solver_progress": {"seconds": [], "cost": [], "bound": []}}
    path = tmp_path / "bad.html"
    path.write_text(render_html(bad))
    r = _browse(path, "--dump-dom")
    body = re.search(r"<body[^>]*>", r.stdout).group(0)
    assert 'data-status="error' in body, body
