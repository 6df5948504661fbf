"""The worker's side of each run: the spawner's link and the monitor (code of the worker process).

:class:`SpawnerLink` forks the spawner (``_spawner.py``) and receives its runners and their
exit statuses; :class:`Monitor` hands one request to a ready runner, enforces the deadline
and reports what it observed (exit status or signal, timing, the memory cgroup's OOM count,
peak RSS), never a message of the sandboxed code. Sessions are the one exception: a cell's
status comes from the session's interpreter (tagged with a one-time nonce); the session is
stopped (SIGSTOP) between cells.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import socket
import struct
import time
import traceback

import _cgroups as cgroups
import _confine as confine
from _plumbing import children, frame, read_message
from _spawner import HANDED, HANDED_FDS, REAPED, spawn_runners

READ_CHUNK = 65536
RSS_ESTIMATE_SHARE = 0.5  # without a memory cgroup: peak RSS share that counts as exceeded
MAX_STATUS_BYTES = 4096
"""A session cell's status is a few dozen bytes; a longer frame is malformed."""
DISCARD_INTERVAL = 0.01
"""How often output past the cap is thrown away once a run reached it: meanwhile the run's
writers wait for room in the pipe, so a flood costs the worker a hundred wake-ups a second
and a splice each, not a read of every byte; a run that writes faster than 100 MiB/s past
the cap is slowed to that."""
DISCARD_PIPE_BYTES = 1 << 20
"""The pipe size a stream past the cap gets (the default unprivileged maximum)."""
HANDOFF_SECONDS = 10.0
"""How long a runner may take to read its request (it reads it as soon as it is written)."""


class SpawnerLink:
    """The worker's end of the spawner: forks it, then receives its runners and their exits."""

    def __init__(self, setup: dict) -> None:
        self.channel, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if setup["namespaces"]:
            confine.unshare(confine.CLONE_NEWPID)
        self.pid = os.fork()
        if self.pid == 0:
            code = 1
            try:
                self.channel.close()
                spawn_runners(setup, child_end)
                code = 0
            except BaseException:
                with contextlib.suppress(OSError):
                    os.write(2, traceback.format_exc().encode())
            os._exit(code)
        child_end.close()
        self.handed: list[tuple[int, int, list[int]]] = []
        self.statuses: dict[int, tuple[int, int]] = {}
        self.forgotten: set[int] = set()

    def next_runner(self) -> tuple[int, int, list[int]]:
        """The next runner: its number, cgroup slot, and the parent ends of its pipes and
        its pidfd (blocks until it is forked)."""
        while not self.handed:
            self.receive()
        return self.handed.pop(0)

    def reaped(self, number: int) -> tuple[int, int]:
        """Runner ``number``'s wait status and peak RSS (KiB), once the spawner reaped it."""
        while number not in self.statuses:
            self.receive()
        return self.statuses.pop(number)

    def forget(self, number: int) -> None:
        """Drop runner ``number``'s status, now or when it comes (its run was reported)."""
        if self.statuses.pop(number, None) is None:
            self.forgotten.add(number)

    def fileno(self) -> int:
        """Readable when the spawner has a message (for ``select``)."""
        return self.channel.fileno()

    def receive(self) -> None:
        """Take the next message: a runner handed over, or one reaped."""
        message, fds, _, _ = socket.recv_fds(self.channel, 64, HANDED_FDS)
        if message[:1] == b"R" and len(fds) == HANDED_FDS:
            _, number, slot = HANDED.unpack(message)
            self.handed.append((number, slot, fds))
        elif message[:1] == b"S" and not fds:
            _, number, wait_status, max_rss_kb = REAPED.unpack(message)
            if number in self.forgotten:
                self.forgotten.discard(number)
            else:
                self.statuses[number] = (wait_status, max_rss_kb)
        else:
            raise OSError("the sandbox spawner exited")

    def close(self) -> None:
        self.channel.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        for _, _, fds in self.handed:
            for fd in fds:
                os.close(fd)


class Monitor:
    """The worker's side of one runner: hands it the request, enforces the deadline and
    reports what it observed."""

    def __init__(self, setup: dict, spawner: SpawnerLink, slot_memory: dict[int, int]) -> None:
        self.setup = setup
        self.spawner = spawner
        limits = setup["limits"]
        self.number, self.slot, fds = spawner.next_runner()
        self.slot_memory = slot_memory  # each run slot's memory limit now, in MiB
        self.out_r, self.err_r, self.requests_w, self.status_r, self.pidfd = fds
        self.run_cgroup = setup["run_cgroups"][self.slot]
        self.oom_kills = cgroups.oom_kills(self.run_cgroup)
        ready = read_message(self.status_r)
        self.ready = ready is not None
        self.runner_pid = _pid_of(self.pidfd) if self.ready else None
        self.namespace_fds = [
            os.open(f"/proc/{self.runner_pid}/ns/{kind}", os.O_RDONLY)
            for kind in (("mnt", "ipc") if setup["mount"] and self.runner_pid else ())
        ]  # held until after the reply, so the namespaces are torn down off the critical path
        self.listener = None  # exit notices: the exit status before the runner's teardown
        if self.runner_pid and ready.get("listener") is not None:
            try:
                self.listener = confine.pidfd_getfd(self.pidfd, ready["listener"])
            except OSError:  # unanswered, its exit_group calls would end one thread each
                self.ready = False
        self.exit_noticed = False
        for fd in (self.out_r, self.err_r, self.status_r, self.requests_w):
            os.set_blocking(fd, False)
        self.status_buffer = bytearray()
        self.alive = True
        self.exit_code: int | None = None
        self.max_rss_kb = 0
        self.cap = limits["max_output_bytes"]
        self.memory_mb = limits["memory_mb"]
        self.devnull: int | None = None  # opened when output first goes past the cap

    def startup_error(self) -> str:
        """Why the runner died before it was ready (the last line of its traceback)."""
        self.stop()
        stderr = bytearray()
        self._drain(self.err_r, stderr, {self.err_r: 0})
        reason = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no reason"]
        return f"sandbox runner failed to start: {reason[0]}"

    def start(self, job: dict) -> str | None:
        """Hand the request to the waiting runner (limits of this run first); returns why
        that failed, if it did."""
        self.cap = job["limits"]["max_output_bytes"]
        self.memory_mb = job["limits"]["memory_mb"]
        if self.run_cgroup and self.slot_memory[self.slot] != self.memory_mb:
            # The slot's last runner has been reaped (the spawner forked this one after);
            # what it left to free is reclaimed now, or waited for (EBUSY).
            try:
                cgroups.set_memory(self.run_cgroup, self.memory_mb)
            except OSError as exc:
                return f"sandbox could not set the run's memory limit: {exc}"
            self.slot_memory[self.slot] = self.memory_mb
        request = frame({k: v for k, v in job.items() if k != "id"})
        if not self._write_request(request, time.perf_counter() + HANDOFF_SECONDS):
            return "sandbox runner did not take its request"
        return None

    def _write_request(self, data: bytes, deadline: float) -> bool:
        """Write ``data`` to the runner's requests by ``deadline``; False if it did not read
        them in time (a session whose earlier cell stopped reading). A runner that is gone
        counts as written: its exit is what the run reports."""
        view = memoryview(data)
        while view:
            left = deadline - time.perf_counter()
            if left <= 0 or not select.select([], [self.requests_w], [], left)[1]:
                return False
            try:
                view = view[os.write(self.requests_w, view) :]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                return True
        return True

    def execute(self, code: str | None, timeout: float) -> dict:
        """Run one cell (``code``; None for a one-shot run) and report what was observed."""
        started = time.perf_counter()
        deadline = started + timeout
        nonce = os.urandom(16).hex()
        status, timed_out = None, False
        if code is not None:
            self._signal_run(signal.SIGCONT)
            timed_out = not self._write_request(frame({"code": code, "nonce": nonce}), deadline)
        output = {self.out_r: bytearray(), self.err_r: bytearray()}
        dropped = {self.out_r: 0, self.err_r: 0}
        if not timed_out:
            status, timed_out = self._watch(code is not None, nonce, deadline, output, dropped)
        duration = time.perf_counter() - started
        if self.exit_noticed:
            self._end_the_rest()
        exit_code = None
        if timed_out or code is None or status is None or status["exited"]:
            exit_code = self.stop()
        else:
            self._signal_run(signal.SIGSTOP)  # no CPU for the session between cells
        for fd in output:
            self._drain(fd, output[fd], dropped)
        if status is not None and (exit_code is None or status["exited"]):
            # A cell that exited said with what (its runner is killed before it can finish
            # exiting: with exit notices it waits for an answer that comes no more).
            exit_code = status["exit_code"]
        return {
            "stdout": output[self.out_r].decode("utf-8", "replace"),
            "stderr": output[self.err_r].decode("utf-8", "replace"),
            "exit_code": -signal.SIGKILL if timed_out else exit_code,
            "timed_out": timed_out,
            "memory_exceeded": self._memory_exceeded(exit_code),
            "duration": duration,
            "truncated": any(dropped.values()),
            "session_alive": self.alive,
        }

    def _watch(
        self, cell: bool, nonce: str, deadline: float, output: dict, dropped: dict
    ) -> tuple[dict | None, bool]:
        """Collect output until the run (or the cell) ends or ``deadline`` passes; returns
        the cell's status (sessions) and whether it timed out."""
        watched = [self.out_r, self.err_r, self.spawner]
        watched += [fd for fd in (self.status_r if cell else None, self.listener) if fd is not None]
        status, capped = None, []
        while status is None and self.alive:
            left = deadline - time.perf_counter()
            if left <= 0:
                return status, True
            wait = min(left, DISCARD_INTERVAL) if capped else left
            for fd in select.select(watched, [], [], wait)[0]:
                if fd in output:
                    ended = self._drain(fd, output[fd], dropped)
                    if ended or len(output[fd]) >= self.cap:
                        watched.remove(fd)  # closed by the run: no busy loop on end of file
                    if not ended and len(output[fd]) >= self.cap:
                        capped.append(fd)  # from now on thrown away on a timer
                        with contextlib.suppress(OSError):
                            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, DISCARD_PIPE_BYTES)
                elif fd == self.status_r:
                    status = self._read_status(nonce)
                elif fd == self.listener:
                    self._take_exit_notice()
                else:  # the spawner reports exits: one wake-up, not one per pidfd and status
                    self.spawner.receive()
                    self.alive = self.number not in self.spawner.statuses
            capped = [fd for fd in capped if not self._discard(fd, dropped)]
        return status, False

    def _take_exit_notice(self) -> None:
        """Let a process of the run go on exiting; the runner's own exit ends the run, with
        the status it exits with (the teardown of its memory happens after the reply)."""
        try:
            pid, _, status = confine.receive_notice(self.listener)
        except OSError:  # it was killed while it waited
            return
        if pid == self.runner_pid:
            self.alive = False
            self.exit_code = status & 0xFF
            self.exit_noticed = True

    def _end_the_rest(self) -> None:
        """After the runner's exit notice: if processes of the run are left, kill them and
        reply only once the spawner has reaped the runner (the init of a PID namespace is
        reaped after every process in it), so that nothing of this run exists when the next
        one starts. A runner that was alone is past running code: the kernel tears it down
        after the reply."""
        listed = self._processes_of_the_run()
        others = [pid for pid in listed or () if pid != self.runner_pid]
        if not others:
            return
        if not cgroups.kill(self.run_cgroup):
            for pid in others:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        _, self.max_rss_kb = self.spawner.reaped(self.number)
        self.exit_noticed = False  # reaped: nothing to forget

    def _memory_exceeded(self, exit_code: int | None) -> bool:
        if self.run_cgroup.get("memory"):
            return cgroups.oom_kills(self.run_cgroup) > self.oom_kills
        if not exit_code:
            return False
        return self.max_rss_kb * 1024 >= RSS_ESTIMATE_SHARE * (self.memory_mb << 20)

    def _drain(self, fd: int, kept: bytearray, dropped: dict[int, int]) -> bool:
        """Read what ``fd`` holds into ``kept`` up to the cap, throw the rest away; True at
        end of file."""
        while len(kept) < self.cap:
            try:
                chunk = os.read(fd, min(READ_CHUNK, self.cap - len(kept)))
            except BlockingIOError:
                return False
            if not chunk:
                return True
            kept += chunk
        return self._discard(fd, dropped)

    def _discard(self, fd: int, dropped: dict[int, int]) -> bool:
        """Move what ``fd`` holds to ``/dev/null`` inside the kernel (no copy, no parsing),
        counting it in ``dropped``; True at end of file."""
        if self.devnull is None:
            self.devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        while True:
            try:
                moved = os.splice(fd, self.devnull, DISCARD_PIPE_BYTES, flags=os.SPLICE_F_NONBLOCK)
            except BlockingIOError:
                return False
            if not moved:
                return True
            dropped[fd] += moved

    def _read_status(self, nonce: str) -> dict | None:
        """The runner's status of the current cell; messages of other cells are dropped and
        a malformed one, or the pipe closed, ends the session."""
        try:
            chunk = os.read(self.status_r, READ_CHUNK)
        except BlockingIOError:
            chunk = None
        if chunk == b"":
            self.stop()
            return None
        self.status_buffer += chunk or b""
        while len(self.status_buffer) >= 4:
            size = struct.unpack(">I", self.status_buffer[:4])[0]
            if size > MAX_STATUS_BYTES:
                self.stop()
                return None
            if len(self.status_buffer) < 4 + size:
                return None
            body = bytes(self.status_buffer[4 : 4 + size])
            del self.status_buffer[: 4 + size]
            try:
                status = json.loads(body)
                valid = (
                    type(status) is dict
                    and type(status.get("exit_code")) is int
                    and -255 <= status["exit_code"] <= 255
                    and type(status.get("exited")) is bool
                )
            except ValueError:
                valid = False
            if not valid:
                self.stop()
                return None
            if status.get("nonce") == nonce:
                return status
        return None

    def _signal_run(self, signum: int) -> None:
        """Send ``signum`` to every process of the run, until no new one appears."""
        done: set[int] = set()
        while self.alive:
            listed = self._processes_of_the_run()
            pids = set(listed or ()) - done
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signum)
            done |= pids

    def _processes_of_the_run(self) -> list[int] | None:
        """The run's processes; None once its runner has exited, when all of them are gone
        (a PID namespace's init exits last) and the slot's cgroup may already hold the next
        runner (the spawner forks it right after the reap)."""
        listed = self._run_pids()
        return None if select.select([self.pidfd], [], [], 0)[0] else listed

    def _run_pids(self) -> list[int]:
        if self.run_cgroup:
            return cgroups.pids(self.run_cgroup)
        # With PID namespaces the run's orphans are the runner's (its PID 1), and the
        # spawner's other child is the next runner; without, the spawner is the subreaper
        # of the one live runner's orphans.
        if self.setup["namespaces"]:
            found, frontier = [self.runner_pid], [self.runner_pid]
        else:
            found, frontier = [], [self.spawner.pid]
        while frontier:
            below = [child for pid in frontier for child in children(pid)]
            found += below
            frontier = below
        return found

    def stop(self) -> int:
        """Kill the runner and everything it started; returns the runner's exit code."""
        if self.exit_code is not None:
            return self.exit_code
        self.alive = False
        if not self.setup["namespaces"] and self.runner_pid:  # its whole group, at once
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.runner_pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        wait_status, self.max_rss_kb = self.spawner.reaped(self.number)  # orphans died first
        self.exit_code = os.waitstatus_to_exitcode(wait_status)
        return self.exit_code

    def close(self) -> None:
        """End the run: no process, cgroup or file of it is left afterwards."""
        with contextlib.suppress(OSError):
            os.close(self.requests_w)
        if self.exit_noticed:  # exiting already; reaped by the spawner while the next run goes
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)  # even if the exit stalls
            self.spawner.forget(self.number)
        else:
            self.stop()
        kept = [fd for fd in (self.listener, self.devnull) if fd is not None]
        for fd in (self.out_r, self.err_r, self.status_r, self.pidfd, *kept, *self.namespace_fds):
            os.close(fd)


def _pid_of(pidfd: int) -> int | None:
    """The process id behind ``pidfd`` in this process's PID namespace (None once it exited)."""
    with open(f"/proc/self/fdinfo/{pidfd}") as handle:
        for line in handle:
            if line.startswith("Pid:"):
                pid = int(line.split()[1])
                return pid if pid > 0 else None
    return None
