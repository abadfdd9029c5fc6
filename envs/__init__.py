"""Parameterised environment families for POET (independent of the `poet` package).

`FAMILIES` maps a family name to a factory `(**options) -> EnvFamily`. Envs are also
registered with gymnasium under the `poet/` namespace, e.g. `gymnasium.make("poet/Terrain-v0")`.
"""

from __future__ import annotations

from envs.base import EnvCache, EnvFamily, EnvParamError, EnvParams
from envs.kernel import RowKernel
from envs.registry import FAMILIES, make_family, register_gymnasium_envs

register_gymnasium_envs()

__all__ = ["EnvCache", "EnvFamily", "EnvParamError", "EnvParams", "FAMILIES", "RowKernel", "make_family"]
