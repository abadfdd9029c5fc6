"""Curricula: the registry (`CURRICULA`, name -> class) and `module:Class` resolution.

Adding one is a file here and a line below.
"""

from __future__ import annotations

from poet.config import under
from poet.curricula.base import Curriculum, PhaseTimer
from poet.curricula.direct import DirectCurriculum
from poet.curricula.dr import DomainRandomization
from poet.curricula.path import DirectPath
from poet.curricula.plr import ACCEL, RobustPLR
from poet.curricula.poet import EnhancedPoetCurriculum, PoetCurriculum
from poet.plugins import import_named

CURRICULA: dict[str, type] = {
    "poet": PoetCurriculum,
    "enhanced_poet": EnhancedPoetCurriculum,
    "dr": DomainRandomization,
    "direct": DirectCurriculum,
    "robust_plr": RobustPLR,
    "accel": ACCEL,
    "path": DirectPath,
}


def curriculum_defaults(name: str) -> dict:
    """The settings curriculum `name` runs with where a config leaves them unset: its class's
    `defaults` (its authors' shipped script), over POET's for what they do not name. An unknown
    name gets POET's: building the run then says what is wrong with it."""
    try:
        own = getattr(resolve_curriculum(name), "defaults", {})
    except ValueError:
        own = {}
    return under(PoetCurriculum.defaults, own)


def resolve_curriculum(name: str) -> type:
    """The class registered as `name`, or the one `package.module:Class` names."""
    if name in CURRICULA:
        return CURRICULA[name]
    if ":" not in name:
        raise ValueError(
            f"unknown curriculum {name!r}; registered: {', '.join(sorted(CURRICULA))}, "
            "or name your own as 'package.module:Class'"
        )
    cls = import_named(name, "curriculum")
    for method in ("start", "run_iteration"):
        if not callable(getattr(cls, method, None)):
            raise ValueError(f"{name!r} is not a curriculum: it has no {method}() (see poet.curricula.base)")
    return cls


__all__ = [
    "ACCEL",
    "CURRICULA",
    "DirectPath",
    "RobustPLR",
    "Curriculum",
    "curriculum_defaults",
    "DirectCurriculum",
    "DomainRandomization",
    "EnhancedPoetCurriculum",
    "PhaseTimer",
    "PoetCurriculum",
    "resolve_curriculum",
]
