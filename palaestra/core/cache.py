"""Where palaestra keeps what it builds once and reuses (indexes, generated databases)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$PALAESTRA_CACHE_DIR``, else ``$XDG_CACHE_HOME/palaestra``, else
    ``~/.cache/palaestra``."""
    if explicit := os.environ.get("PALAESTRA_CACHE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "palaestra"
