"""Helpers every process of the sandbox uses: message framing, the process tree, deleting a tree.

Shipped with the worker (``palaestra/sandboxes/local.py`` bundles it); standard library only.
Messages are a 4-byte big-endian length and UTF-8 JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct


def read_message(fd: int) -> dict | None:
    """Next message on ``fd``, or None at end of file."""
    header = _read_exact(fd, 4)
    if header is None:
        return None
    body = _read_exact(fd, struct.unpack(">I", header)[0])
    return None if body is None else json.loads(body)


def frame(message: dict) -> bytes:
    """``message`` as it goes over a pipe: its length (4 bytes, big-endian), then its JSON."""
    body = json.dumps(message).encode()
    return struct.pack(">I", len(body)) + body


def write_message(fd: int, message: dict) -> None:
    data = memoryview(frame(message))
    while data:
        data = data[os.write(fd, data) :]


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def collect_unix_sockets() -> None:
    """Have the kernel collect the UNIX sockets that only messages in flight still hold.

    A run can pass descriptors (memfds of its memory, sockets) over a socket pair that it
    then sends over itself: when the run exits, nothing but the pair's own queue holds
    them, and the kernel's collector of such cycles runs only when some UNIX socket is
    released, which may be never; meanwhile their memory stays charged to the run's cgroup
    slot and their count to its uid (``ETOOMANYREFS``). Releasing a socket of our own
    starts the collector now.
    """
    for end in socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM):
        end.close()


def children(parent: int) -> list[int]:
    """Pids whose parent is ``parent``."""
    try:
        found = []
        for tid in os.listdir(f"/proc/{parent}/task"):
            with open(f"/proc/{parent}/task/{tid}/children") as handle:
                found += [int(pid) for pid in handle.read().split()]
        return found
    except OSError:
        return [pid for pid in all_pids() if parent_of(pid) == parent]


def all_pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def remove_tree(path: str) -> None:
    """Delete ``path`` however deep, however its permissions were changed (no recursion).

    Subdirectories are pulled up into the top directory one level at a time, so neither
    the path length nor the number of open descriptors grows with the depth.
    """
    with contextlib.suppress(FileNotFoundError):
        os.chmod(path, stat.S_IRWXU)
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        prefix, moved = f".pulled-{os.urandom(8).hex()}-", 0
        try:
            while True:
                entries = list(os.scandir(top))
                if not entries:
                    break
                for entry in entries:
                    if not entry.is_dir(follow_symlinks=False):
                        os.unlink(entry.name, dir_fd=top)
                        continue
                    os.chmod(entry.name, stat.S_IRWXU, dir_fd=top)
                    inner = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=top)
                    try:
                        for child in os.listdir(inner):
                            moved += 1
                            os.rename(child, f"{prefix}{moved}", src_dir_fd=inner, dst_dir_fd=top)
                    finally:
                        os.close(inner)
                    os.rmdir(entry.name, dir_fd=top)
        finally:
            os.close(top)
        os.rmdir(path)
