"""Thin access to the C++ cost model (csrc/core/cost_model.h).

All pricing happens in C++; this module only turns a calibration argument
(path, dict or JSON text) into the JSON text the constructor takes.
"""
from __future__ import annotations

import json
import os
from typing import Any, Union

from . import _C

CostModel = _C.CostModel
device_names = _C.device_names
device_profile = _C.device_profile
default_topology = _C.default_topology

Calibration = Union[None, str, "os.PathLike[str]", dict]


def calibration_text(calibration: Calibration) -> str:
    """JSON text of a calibration given as a dict, a file path or JSON text."""
    if calibration is None:
        return ""
    if isinstance(calibration, dict):
        return json.dumps(calibration)
    text = os.fspath(calibration)
    if text.lstrip().startswith("{"):
        return text
    with open(text) as f:
        return f.read()


def load_cost_model(device: str = "H100", calibration: Calibration = None) -> Any:
    """A CostModel for `device`, with an optional calibration profile applied."""
    return CostModel(device, calibration_text(calibration))
