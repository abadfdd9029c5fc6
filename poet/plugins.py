"""`package.module:Name` references in config (user trainers and curricula)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


def import_named(path: str, what: str, registered: bool = True) -> Any:
    """The object `package.module:Name` names; a ValueError saying what is wrong names `what`
    (and, where `what` also has a registry, that a registered name would do).

    As under `python -m`, the directory the command runs in is importable, so the console
    script `poet` finds a user's modules there.
    """
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        either = "a registered name or " if registered else ""
        raise ValueError(f"{what} must be {either}'package.module:Name', got {path!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {what} module {module_name!r}: {exc}") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise ValueError(f"module {module_name!r} has no {what} {attr!r}")
    return obj
