"""A progress bar for long solves: elapsed time against the limit, with the best plan's
cost, the proven bound and the gap, on stderr.

The C++ planner calls `SolveProgress.update` from its solver threads whenever the best
plan or the bound improves; a small Python thread redraws the bar a few times a second
(the planner releases the GIL while it solves) so it moves even while nothing improves.
Shown only for solves that run longer than DELAY seconds, and by default only when stderr
is a terminal (tqdm draws it; `progress=True` forces it, `False` turns it off).
"""
from __future__ import annotations

import math
import sys
import threading
import time

from ._log import get_logger

DELAY = 2.0  # seconds before a bar appears: short solves stay quiet
TICK = 0.25  # redraw period

_log = get_logger(__name__)


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms" if seconds < 1 else f"{seconds:.4g} s"


def describe(cost: float, bound: float, fmt=_time) -> str:
    """'cost 4.77 ms, bound 4.75 ms, gap 0.42%' (`fmt` formats a cost: the planner's are
    estimated step seconds; a problem file's are its own units)."""
    cost, bound = float(cost), float(bound)
    gap = (cost - bound) / cost if cost > 0 and math.isfinite(bound) else float("nan")
    gap_text = f"{100 * gap:.2f}%" if math.isfinite(gap) else "n/a"
    bound_text = fmt(bound) if math.isfinite(bound) else "none yet"
    return f"cost {fmt(cost)}, bound {bound_text}, gap {gap_text}"


class SolveProgress:
    """Context manager around one solve; pass `update` to the planner as its progress callback."""

    def __init__(self, time_limit: float, enabled=None, file=None, description: str = "solving", fmt=_time):
        if enabled not in (None, True, False):
            raise ValueError(f"progress: expected True, False or None (a bar when stderr is a terminal), "
                             f"got {enabled!r}")
        self.file = file if file is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.file, "isatty", lambda: False)())
        self.enabled = enabled
        self.time_limit = max(float(time_limit), 1e-3)
        self.description = description
        self.fmt = fmt
        self.latest = None  # (seconds, cost, bound): written by solver threads, read by the ticker
        self._stop = threading.Event()
        self._thread = None
        self._bar = None
        self._tqdm = None
        self._t0 = 0.0

    def update(self, seconds: float, cost: float, bound: float) -> None:
        self.latest = (seconds, cost, bound)
        _log.debug("solve at %.2f s: %s", seconds, describe(cost, bound, self.fmt))

    def __enter__(self):
        self._t0 = time.monotonic()
        if self.enabled:
            from tqdm import tqdm  # a runtime dependency (pyproject.toml): missing, it fails here, loudly

            self._tqdm = tqdm
            self._thread = threading.Thread(target=self._run, name="torch_localmap-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._draw(finished=exc_type is None)
            self._bar.close()
        return False

    def _run(self):
        while True:
            if time.monotonic() - self._t0 >= DELAY:
                self._draw()
            if self._stop.wait(TICK):
                return

    def _draw(self, finished=False):
        if self._bar is None:
            self._bar = self._tqdm(total=round(self.time_limit, 1), desc=self.description, unit="s", file=self.file,
                             bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total} s{postfix}",
                             dynamic_ncols=True, leave=True)
        elapsed = min(time.monotonic() - self._t0, self.time_limit)
        self._bar.n = round(elapsed, 1)
        if finished:
            # The solver stops a little before its limit (or long before it, on a proven gap):
            # a finished solve is drawn full, over the time it took, not as 97% of the limit.
            self._bar.total = self._bar.n = max(round(elapsed, 1), 0.1)
        latest = self.latest
        self._bar.set_postfix_str(describe(latest[1], latest[2], self.fmt) if latest else "no plan yet", refresh=False)
        self._bar.refresh()
