"""Curricula: the registry (`CURRICULA`, name -> class) and `module:Class` resolution.

Adding one is a file here and a line below.
"""
from __future__ import annotations

import importlib

from poet.curricula.base import Curriculum, PhaseTimer
from poet.curricula.poet import EnhancedPoetCurriculum, PoetCurriculum

CURRICULA: dict[str, type] = {
    "poet": PoetCurriculum,
    "enhanced_poet": EnhancedPoetCurriculum,
}


def resolve_curriculum(name: str) -> type:
    """The class registered as `name`, or the one `package.module:Class` names."""
    if name in CURRICULA:
        return CURRICULA[name]
    module_name, sep, attr = name.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"unknown curriculum {name!r}; registered: {', '.join(sorted(CURRICULA))}, "
                         "or name your own as 'package.module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r} for curriculum {name!r} ({exc})") from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise ValueError(f"module {module_name!r} has no {attr!r}")
    for method in ("start", "run_iteration"):
        if not callable(getattr(cls, method, None)):
            raise ValueError(f"{name!r} is not a curriculum: it has no {method}() (see poet.curricula.base)")
    return cls


__all__ = ["CURRICULA", "Curriculum", "EnhancedPoetCurriculum", "PhaseTimer", "PoetCurriculum", "resolve_curriculum"]
