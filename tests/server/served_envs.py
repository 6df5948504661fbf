"""Envs the server tests register (importable, so worker processes can build them too)."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
import time

from palaestra.testing.echo import EchoEnv


class SlowEcho(EchoEnv):
    """Echo whose steps take ``sleep:<seconds>`` seconds when asked to (a slow server)."""

    async def astep(self, action: str):
        if action.startswith("sleep:"):
            await asyncio.sleep(float(action.removeprefix("sleep:")))
        return self.step(action)


class Crashy(EchoEnv):
    def step(self, action: str):
        raise RuntimeError("env bug")


class ThreadedEcho(EchoEnv):
    """Echo stepped on its session's thread; its info names the thread and process."""

    threaded_step = True

    def step(self, action: str):
        obs, reward, terminated, truncated, info = super().step(action)
        where = {"thread": threading.current_thread().name, "pid": os.getpid()}
        return obs, reward, terminated, truncated, {**info, **where}


GATE = threading.Event()
"""Steps of :class:`Gated` wait until a test sets it."""


class Gated(ThreadedEcho):
    """A slow env: each step blocks its thread until :data:`GATE` is set."""

    def step(self, action: str):
        GATE.wait()
        return super().step(action)


class NativeAsync(EchoEnv):
    """An env with async twins of its own (I/O); its info names the thread that ran them."""

    async def astep(self, action: str):
        await asyncio.sleep(0)
        obs, reward, terminated, truncated, _ = self.step(action)
        return obs, reward, terminated, truncated, {"thread": threading.current_thread().name}


class BigObservation(EchoEnv):
    """Observes ``n`` bytes for the action ``n`` (a large answer on a small request)."""

    def step(self, action: str):
        return "y" * int(action), 0.0, False, False, {}


class SlowBuild(EchoEnv):
    """Takes a while to build, and counts its builds."""

    built = 0

    def __init__(self, **kwargs):
        time.sleep(0.05)
        type(self).built += 1
        super().__init__(**kwargs)


class LeakyError(EchoEnv):
    """Fails like an env that read a file named by its action."""

    def step(self, action: str):
        raise FileNotFoundError(2, "No such file or directory", action)


class NotJSON(EchoEnv):
    """Answers the action ``loop`` with an info that cannot be JSON (it holds itself)."""

    def step(self, action: str):
        obs, reward, terminated, truncated, info = super().step(action)
        if action == "loop":
            info = {}
            info["self"] = info
        return obs, reward, terminated, truncated, info


class ThreadedNotJSON(NotJSON):
    threaded_step = True


class Mortal(ThreadedEcho):
    """Echo whose step ``die`` kills the worker process it runs in (never the test's own)."""

    def step(self, action: str):
        if action == "die" and multiprocessing.parent_process() is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().step(action)


SERVED_TEST_ENVS = {
    "test:Echo-v0": EchoEnv,
    "test:SlowEcho-v0": SlowEcho,
    "test:ServerCrashy-v0": Crashy,
    "test:ThreadedEcho-v0": ThreadedEcho,
    "test:Gated-v0": Gated,
    "test:NativeAsync-v0": NativeAsync,
    "test:BigObservation-v0": BigObservation,
    "test:SlowBuild-v0": SlowBuild,
    "test:LeakyError-v0": LeakyError,
    "test:NotJSON-v0": NotJSON,
    "test:ThreadedNotJSON-v0": ThreadedNotJSON,
    "test:Mortal-v0": Mortal,
}
