"""The spawner process: forks the runners ahead of their runs, reaps them, reports their exits.

Forked by the worker before any request (``_monitor.py``, :class:`SpawnerLink`) and never
reading one, so a runner forked from it inherits nothing of earlier runs. It keeps
``setup["live_runners"]`` runners alive (with PID namespaces two: the one running and the
next, confined and waiting, in a cgroup slot of its own), hands each new runner's pipe ends
and pidfd to the worker (``SCM_RIGHTS`` over a socket pair), reaps runners as they exit,
kills what a run left behind and reports the exit status. With namespaces it is PID 1 of a
PID namespace of the worker's user namespace, which lets it give each runner a PID
namespace of its own (``unshare`` before the fork, ``setns`` back after) without an
intermediate process.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import struct
import tempfile
import traceback

import _cgroups as cgroups
import _confine as confine
from _plumbing import children, collect_unix_sockets, remove_tree
from _runner import runner_main

HANDED = struct.Struct("=cqq")  # b"R", runner number, cgroup slot; fds attached
REAPED = struct.Struct("=cqiq")  # b"S", runner number, wait status, peak RSS in KiB
HANDED_FDS = 5  # stdout, stderr, requests, statuses, pidfd


def spawn_runners(setup: dict, channel: socket.socket) -> None:
    """The spawner's loop: keep the live runners forked and handed over, reap and report
    each as it exits; until the worker is gone."""
    confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGKILL)
    confine.prctl(confine.PR_SET_CHILD_SUBREAPER, 1)  # orphans of a run come back here
    cgroups.join(setup["spawner_cgroups"])  # the runners are born in them
    own_pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY) if setup["namespaces"] else -1
    live: dict[int, tuple[int, int, str]] = {}  # pid -> runner number, cgroup slot, work dir
    numbers = itertools.count()
    while True:
        while len(live) < setup["live_runners"]:
            slot = min(set(range(setup["live_runners"])) - {s for _, s, _ in live.values()})
            workdir = "/tmp" if setup["mount"] else _host_workdir(setup)
            number = next(numbers)
            pid = _fork_runner(setup, slot, workdir, number, channel, own_pid_namespace)
            live[pid] = (number, slot, workdir)
        if setup["namespaces"]:  # the orphans of a run die with its PID namespace
            pid, wait_status, rusage = os.wait4(-1, 0)
        else:  # one live runner; its group and orphans are killed before the next is forked
            (pid,) = live
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # a zombie holds its group id
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            _, wait_status, rusage = os.wait4(pid, 0)
            kill_orphans()
        number, _, workdir = live.pop(pid)
        collect_unix_sockets()  # before the slot's next runner: what the run passed dies
        try:
            channel.send(REAPED.pack(b"S", number, wait_status, rusage.ru_maxrss))
        except OSError:
            return
        finally:
            if not setup["mount"]:
                remove_tree(workdir)


def _fork_runner(
    setup: dict, slot: int, workdir: str, number: int, channel: socket.socket, pid_ns: int
) -> int:
    """Fork a runner into its own PID namespace and hand it to the worker; its pid."""
    (out_r, out_w), (err_r, err_w), (requests_r, requests_w), (status_r, status_w) = (
        os.pipe() for _ in range(4)
    )
    if setup["namespaces"]:
        confine.unshare(confine.CLONE_NEWPID)
    pid = os.fork()
    if pid == 0:
        try:
            runner_main(
                setup, workdir, setup["run_cgroups"][slot], [out_w, err_w, requests_r, status_w]
            )
        except BaseException:
            with contextlib.suppress(OSError):
                os.write(2, traceback.format_exc().encode())
        os._exit(125)
    if setup["namespaces"]:
        confine.setns(pid_ns, confine.CLONE_NEWPID)
    handed = [out_r, err_r, requests_w, status_r, os.pidfd_open(pid)]
    try:
        socket.send_fds(channel, [HANDED.pack(b"R", number, slot)], handed)
    except OSError:  # the worker is gone
        os.kill(pid, signal.SIGKILL)
    for fd in (*handed, out_w, err_w, requests_r, status_w):
        os.close(fd)
    return pid


def _host_workdir(setup: dict) -> str:
    path = tempfile.mkdtemp(prefix="run-", dir=setup["base_dir"])
    if setup["run_uid"] is not None:
        os.chown(path, setup["run_uid"], setup["run_uid"])
    return path


# ----------------------------------------------------------------------------- monitor


def kill_orphans() -> None:
    """Kill and reap every remaining child (orphans are reparented to this subreaper)."""
    while True:
        for pid in children(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
            while os.waitpid(-1, os.WNOHANG)[0]:  # reap every dead one before listing again
                pass
        except ChildProcessError:
            return
