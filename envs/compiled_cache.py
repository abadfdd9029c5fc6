"""numba's on-disk cache kept in step with the sources it was compiled from.

numba keys each cached function on its own source file only, yet a compiled function holds
compiled copies of the jitted functions it calls from other files: `forward_row` holds
`poet.dense`'s pass, the evaluator's row loop holds `forward_row`, the terrain course builder
holds `envs.seed_stream`'s generator. After such a file changes, numba would go on loading
the stale copies. So each package, as it is imported, compares a digest of its numba sources
(the files that mention numba) with the one its cache was made from, and where they differ
deletes the package's cached code before any of it loads; numba then compiles it again, once.

Only the cache beside the sources (`__pycache__`, numba's first choice) is checked: an
install whose directory cannot be written has its cache elsewhere, and is only ever changed
whole, which numba's own stamps catch.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

STAMP = "numba-sources.sha256"


def numba_sources_digest(package: Path) -> str:
    """sha256 over the package's `.py` files that mention numba: their paths and contents."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        text = path.read_bytes()
        if b"numba" in text:
            digest.update(path.relative_to(package).as_posix().encode() + b"\0")
            digest.update(text + b"\0")
    return digest.hexdigest()


def drop_stale_cache(package: Path) -> bool:
    """Delete the package's numba cache files (`__pycache__/*.nbi`, `*.nbc`) if its numba
    sources changed since they were written; returns whether they were deleted."""
    digest = numba_sources_digest(package)
    stamp = package / "__pycache__" / STAMP
    try:
        if stamp.read_text() == digest:
            return False
    except OSError:
        pass  # no stamp yet: whatever cache there is predates the check
    for pattern in ("*.nbi", "*.nbc"):
        for cached in package.glob(f"**/__pycache__/{pattern}"):
            try:
                cached.unlink()
            except OSError:
                pass  # another process removed it first, or the directory is read-only
    try:
        stamp.parent.mkdir(exist_ok=True)
        partial = stamp.with_name(f"{STAMP}.{os.getpid()}")
        partial.write_text(digest)
        partial.replace(stamp)  # atomic: a process that reads it sees one digest or the other
    except OSError:
        pass
    return True
