"""Files a cache may delete, held while in use, and built again if they went anyway.

>>> held = FileHold(path)  # no cache deletes the file until held.close()  # doctest: +SKIP

A cache of files (the SQL family's generated databases and fuzzed copies) deletes its least
recently used files with :func:`delete_unless_held`, which skips any file some process
holds (:func:`hold_file`: a shared ``flock``, so it works across processes on one machine).
A hold checks, once it has its lock, that the file it locked is still the one at the path
(an evictor may have deleted it meanwhile). A file that went anyway (deleted by hand, or by
a process on another machine sharing the folder) is built again by the cache that made it
(:func:`add_rebuilder`, :func:`rebuild`), since its files are deterministic from their
recipe. Both SQL backends use these holds, so this module imports neither.
"""

from __future__ import annotations

import errno
import fcntl
import os
import weakref
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "HOLD_TRIES",
    "FileHold",
    "Rebuilder",
    "add_rebuilder",
    "delete_unless_held",
    "file_version",
    "file_version_or_none",
    "hold_file",
    "rebuild",
]

HOLD_TRIES = 4
"""How many times a file that went away between being built and being held is built again."""


def file_version(path: str | Path) -> tuple[int, int, int]:
    """What changes when the file at ``path`` is replaced or written (inode, modification
    time, size); never its access time, which the caches mark use with."""
    stat = os.stat(path)
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def file_version_or_none(path: str | Path) -> tuple[int, int, int] | None:
    """:func:`file_version`, or None when there is no file at ``path``."""
    try:
        return file_version(path)
    except FileNotFoundError:
        return None


def hold_file(owner: object, path: Path) -> Callable[[], None]:
    """Hold a shared lock on ``path`` while ``owner`` lives: a cache that deletes files
    (:func:`delete_unless_held`) leaves it in place. Returns the release (also run when
    ``owner`` is collected). Raises :class:`FileNotFoundError` when there is no file at
    ``path``, or when the file locked is no longer the one there (deleted or replaced
    while the lock was being taken)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH)
        if not _same_file(os.fstat(descriptor), path):
            raise FileNotFoundError(errno.ENOENT, "deleted while being held", str(path))
    except BaseException:
        os.close(descriptor)
        raise
    return weakref.finalize(owner, os.close, descriptor)


def _same_file(opened: os.stat_result, path: Path) -> bool:
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    return (opened.st_dev, opened.st_ino) == (now.st_dev, now.st_ino)


def delete_unless_held(path: Path) -> bool:
    """Delete ``path`` unless a process holds it (:func:`hold_file`); whether it was."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not _same_file(os.fstat(descriptor), path):
            return False  # replaced since it was opened: the new file is not this one
        path.unlink(missing_ok=True)
        return True
    finally:
        os.close(descriptor)


Rebuilder = Callable[[Path, Callable[[Path], object]], bool]
"""``rebuilder(path, hold)``: build the file at ``path`` again if it knows how (a cache's
file, deterministic from its name or a recipe it kept), call ``hold(path)`` once it is
there (before the cache evicts anything), and say whether it did."""
_rebuilders: list[Rebuilder] = []


def add_rebuilder(rebuilder: Rebuilder) -> None:
    """Let :class:`FileHold` build files of a cache again when they went away (a cache
    registers one per kind of file it makes)."""
    if rebuilder not in _rebuilders:
        _rebuilders.append(rebuilder)


def rebuild(path: Path, hold: Callable[[Path], object] = lambda path: None) -> bool:
    """Build ``path`` again with the first :func:`add_rebuilder` that knows it (``hold``
    is called once it is there); whether one did."""
    return any(rebuilder(Path(path), hold) for rebuilder in list(_rebuilders))


class FileHold:
    """A shared lock on the file at ``path`` (:func:`hold_file`) until :meth:`close` (or
    collection): no cache deletes it meanwhile. A file that is not there is built again
    when a cache knows how (:func:`rebuild`; ``build=False``: never), else
    :class:`FileNotFoundError`."""

    def __init__(self, path: str | Path, *, build: bool = True) -> None:
        self.path = Path(path)
        self._release: Callable[[], None] | None = None
        self.renew(build=build)

    def take(self, path: Path) -> None:
        """Hold the file now at ``path`` (this hold's path) instead of the one held before."""
        release = hold_file(self, path)
        if self._release is not None:
            self._release()
        self._release = release

    def renew(self, *, build: bool = True) -> None:
        """Hold the file at the path (again), built again if it went (a user deleted it) and
        ``build`` allows."""
        try:
            self.take(self.path)
        except FileNotFoundError:
            if not build or not rebuild(self.path, self.take):
                raise

    def close(self) -> None:
        if self._release is not None:
            self._release()
            self._release = None
