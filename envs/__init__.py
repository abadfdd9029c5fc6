"""Parameterised environment families for POET (independent of the `poet` package).

`FAMILIES` maps a family name to a factory `(**options) -> EnvFamily`. Envs are also
registered with gymnasium under the `poet/` namespace, e.g. `gymnasium.make("poet/Terrain-v0")`.
"""

from __future__ import annotations

from pathlib import Path

from envs.compiled_cache import drop_stale_cache

drop_stale_cache(Path(__file__).parent)  # before any compiled family loads its cached code

from envs.base import EnvCache, EnvFamily, EnvParamError, EnvParams  # noqa: E402
from envs.kernel import RowKernel  # noqa: E402
from envs.registry import FAMILIES, make_family, register_gymnasium_envs  # noqa: E402

register_gymnasium_envs()

__all__ = ["EnvCache", "EnvFamily", "EnvParamError", "EnvParams", "FAMILIES", "RowKernel", "make_family"]
