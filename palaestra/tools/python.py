"""The python interpreter tool: runs the agent's code in a sandbox, returns its output."""

from __future__ import annotations

from typing import Any

from palaestra.sandboxes import ExecResult, Sandbox, SandboxSession
from palaestra.sandboxes.factory import backend_class, resolve_sandbox
from palaestra.tools.function import FunctionTool


def format_result(result: ExecResult) -> str:
    """Tool observation for an execution: stdout, then stderr, then how it ended if not cleanly."""
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("stderr:\n" + result.stderr.rstrip("\n"))
    if not result.ok:
        parts.append(f"(the program {result.describe()})")
    if result.truncated:
        parts.append("(output truncated)")
    return "\n".join(parts) if parts else "(no output)"


class PythonTool(FunctionTool):
    """``python``: execute Python code and see stdout/stderr (tool-integrated reasoning).

    ``stateful=True`` keeps one interpreter per episode (variables persist across calls,
    like a notebook); otherwise every call is a fresh program. ``sandbox`` is a
    :class:`Sandbox`, a backend name (``"local"``, ``"docker"``, ``"e2b"``: the process-wide
    one of that backend) or None (the shared local one).
    """

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
        self._session: SandboxSession | None = None
        state = "Variables persist between calls. " if stateful else ""
        super().__init__(
            self.run,
            name="python",
            description=(
                "Run Python 3 code and return what it prints (stdout and stderr). "
                f"{state}Use print() to see values. Time limit {timeout:g} s; no network."
            ),
            max_output_chars=max_output_chars,
        )

    @property
    def sandbox(self) -> Sandbox:
        return resolve_sandbox(self._sandbox)

    def run(self, code: str) -> str:
        """Run Python code (what ``call`` runs after checking the arguments).

        Args:
            code: Python source
        """
        return format_result(self._interpreter().run(code, timeout=self.timeout))

    async def acall(self, arguments: dict[str, Any]) -> str:
        checked = self.validate(arguments)
        if isinstance(checked, str):
            return checked
        result = await self._interpreter().arun(checked["code"], timeout=self.timeout)
        return self.render(format_result(result))

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
