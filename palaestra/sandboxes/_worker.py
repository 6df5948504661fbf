"""The sandbox worker process: set up once, then serve each request on a ready runner.

``palaestra/sandboxes/local.py`` starts it as ``python -I -B -c LOADER`` and sends it, as its
first message, this file, the modules it imports and its configuration (the docker backend
does the same inside a container), so no path of the host shows in its command line. It
imports only the standard library. Process tree::

    worker (this file and _monitor.py: warm; own user + network namespace; reads the host's
    │       requests, hands each to a ready runner, enforces the deadline, reports)
    └─ spawner (_spawner.py: forked before any request; never reads one; forks, reaps and
       │        reports the runners)
       └─ runner (_runner.py: PID 1 of a new PID namespace; private mount, IPC and UTS
                  namespaces over a minimal read-only root with a tmpfs work dir; cgroup,
                  fresh keyring, Landlock, seccomp, no capabilities; all of it set up before
                  the request arrives, so a run is a hand-off to a ready process)

The set-up is in ``_setup.py``; kernel mechanisms in ``_confine.py``, ``_cgroups.py`` and
``_view.py`` (what a run can read); helpers shared by the processes in ``_plumbing.py``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal

from _monitor import Monitor, SpawnerLink
from _plumbing import read_message, remove_tree, write_message
from _setup import set_up

PRIVATE = ("limits", "readable", "hidden", "seccomp_program", "run_cgroups", "sys_path")
PRIVATE += ("landlock_reads", "inside_work", "spawner_cgroups")
"""Set-up entries that stay in the worker (the rest is its report to the host)."""


def serve(monitor: Monitor, job: dict) -> None:
    """One run, or one session until it is closed, of the host's request ``job``."""
    if not monitor.ready:
        write_message(1, {"error": monitor.startup_error(), "id": job["id"]})
        return
    error = monitor.start(job)
    if error is not None:
        write_message(1, {"error": error, "id": job["id"]})
        return
    if not job["session"]:
        result = monitor.execute(None, job["timeout"])
        write_message(1, {**result, "id": job["id"]})
        return
    write_message(1, {"started": True, "id": job["id"]})
    while monitor.alive and (request := read_message(0)) is not None:
        if request.get("op") == "close":
            break
        result = monitor.execute(request["code"], request["timeout"])
        write_message(1, {**result, "id": request["id"]})


def worker_main(config: dict) -> None:
    """Set up once, start the spawner, report; then serve each request on a ready runner."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for module in config["preload"]:
        __import__(module)
    try:
        setup, cgroups = set_up(config)
    except Exception as exc:
        write_message(1, {"error": f"{type(exc).__name__}: {exc}"})
        return
    gc.freeze()  # the spawner and its runners share these objects without copying their pages
    spawner = None
    try:
        spawner = SpawnerLink(setup)
        report = {k: v for k, v in setup.items() if k not in PRIVATE}
        write_message(1, {"ready": True, "uid": os.getuid(), **report})
        slot_memory = {slot: setup["limits"]["memory_mb"] for slot in range(setup["live_runners"])}
        while True:
            monitor = Monitor(setup, spawner, slot_memory)  # ready before the request arrives
            try:
                job = read_message(0)
                if job is None:
                    return  # the host closed the pipe
                serve(monitor, job)
            finally:
                monitor.close()
    finally:  # a broken spawner ends the worker too: the host starts a new one
        if spawner is not None:
            spawner.close()
        if cgroups is not None:
            with contextlib.suppress(OSError):  # the host retries once the worker is gone
                cgroups.remove()
        if setup["base_dir"]:
            remove_tree(setup["base_dir"])
