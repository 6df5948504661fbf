"""The python interpreter tool: runs the agent's code in a sandbox, returns its output."""

from __future__ import annotations

from typing import Any

from palaestra.sandboxes import ExecResult, Sandbox, SandboxSession
from palaestra.sandboxes.factory import backend_class, resolve_sandbox


def format_result(result: ExecResult, max_chars: int) -> str:
    """Tool observation for an execution: stdout, then stderr, then how it ended if not cleanly."""
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("stderr:\n" + result.stderr.rstrip("\n"))
    if not result.ok:
        parts.append(f"(the program {result.describe()})")
    text = "\n".join(parts) if parts else "(no output)"
    if len(text) > max_chars or result.truncated:
        text = text[:max_chars] + "\n(output truncated)"
    return text


NEEDS_CODE = 'error: the python tool needs {"code": "<python source>"}'


class PythonTool:
    """``python``: execute Python code and see stdout/stderr (tool-integrated reasoning).

    ``stateful=True`` keeps one interpreter per episode (variables persist across calls,
    like a notebook); otherwise every call is a fresh program. ``sandbox`` is a
    :class:`Sandbox`, a backend name (``"local"``, ``"docker"``, ``"e2b"``: the process-wide
    one of that backend) or None (the shared local one).
    """

    name = "python"

    def __init__(
        self,
        sandbox: Sandbox | str | None = None,
        *,
        timeout: float = 5.0,
        stateful: bool = False,
        max_output_chars: int = 4000,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if isinstance(sandbox, str):
            backend_class(sandbox)  # an unknown name fails here, not at the first call
        self._sandbox = sandbox
        self.timeout = timeout
        self.stateful = stateful
        self.max_output_chars = max_output_chars
        self._session: SandboxSession | None = None

    @property
    def sandbox(self) -> Sandbox:
        return resolve_sandbox(self._sandbox)

    @property
    def schema(self) -> dict[str, Any]:
        state = "Variables persist between calls. " if self.stateful else ""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": (
                    "Run Python 3 code and return what it prints (stdout and stderr). "
                    f"{state}Use print() to see values. Time limit {self.timeout:g} s; no network."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {"code": {"type": "string", "description": "Python source"}},
                    "required": ["code"],
                },
            },
        }

    def call(self, arguments: dict[str, Any]) -> str:
        code = arguments.get("code")
        if not isinstance(code, str):
            return NEEDS_CODE
        result = self._interpreter().run(code, timeout=self.timeout)
        return format_result(result, self.max_output_chars)

    async def acall(self, arguments: dict[str, Any]) -> str:
        code = arguments.get("code")
        if not isinstance(code, str):
            return NEEDS_CODE
        result = await self._interpreter().arun(code, timeout=self.timeout)
        return format_result(result, self.max_output_chars)

    def _interpreter(self) -> Sandbox | SandboxSession:
        """The episode's REPL session (``stateful``), else the sandbox (a fresh program)."""
        if not self.stateful:
            return self.sandbox
        if self._session is None:
            self._session = self.sandbox.session()
        return self._session

    def reset(self) -> None:
        self.close()

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
