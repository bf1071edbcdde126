"""The library's logger, `logging.getLogger("torch_localmap")`: silent by default.

    TORCH_LOCALMAP_LOG=info python train.py     # what was traced, planned, sharded, compiled
    TORCH_LOCALMAP_LOG=debug python train.py    # also per-graph and per-phase detail

The variable is read when the package is imported; an application can instead configure
the logger itself like any other (`logging.getLogger("torch_localmap").setLevel(...)`).
User-facing problems (a plan over its memory limit, ops without a rule) are
`warnings.warn`, not log records, so they show without any configuration.
"""
from __future__ import annotations

import logging
import os

ENV_VAR = "TORCH_LOCALMAP_LOG"
LEVELS = ("debug", "info", "warning", "error")

logger = logging.getLogger("torch_localmap")
logger.addHandler(logging.NullHandler())  # no "no handler" fallback output: silent unless asked


def get_logger(module_name: str) -> logging.Logger:
    """The child logger of a module of this package (`torch_localmap.plan`, ...)."""
    return logging.getLogger(module_name)


def configure_from_env(environ=os.environ) -> None:
    """Sends the logger to stderr at TORCH_LOCALMAP_LOG's level, if it is set."""
    text = environ.get(ENV_VAR, "").strip()
    if not text:
        return
    if text.lower() not in LEVELS:
        raise ValueError(f"{ENV_VAR}={text!r}: expected one of {', '.join(LEVELS)}")
    if not any(getattr(h, "_torch_localmap_env", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(name)s %(levelname)s %(asctime)s] %(message)s"))
        handler._torch_localmap_env = True
        logger.addHandler(handler)
    logger.setLevel(text.upper())
