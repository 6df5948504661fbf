"""The tools of an MCP server (Model Context Protocol) as palaestra tools.

>>> server = MCPServer(command="python", args=["counter_server.py"])
>>> toolset = MCPToolset(server, per_episode=True, timeout=10)  # doctest: +SKIP
>>> [tool.name for tool in toolset.tools]  # doctest: +SKIP
['increment', 'get']
>>> env = ToolEnv(palaestra.make("game:GuessTheNumber-v0"), [toolset])  # doctest: +SKIP

The same as plain data, which a registered wrapper stack keeps and worker processes rebuild:
``ToolEnv(env, [{"name": "mcp", "server": {"command": "python", "args": [...]},
"per_episode": True}])``.

Lifetimes. Shared (the default): one connection serves every episode; the first call opens
it, :meth:`MCPToolset.close` closes it, and after the server dies the next call opens a new
one. ``per_episode=True``, for stateful servers: each episode gets a connection of its own
(over stdio, a server process of its own), opened by the episode's first call and closed by
``reset()`` (which :class:`~palaestra.envs.tool_env.ToolEnv` calls when an episode starts and
when it ends) or ``close()``; a server that dies stays down until the next episode. A
per-episode toolset serves one env at a time (its connection holds one episode's state):
:class:`~palaestra.envs.tool_env.ToolEnv` attaches it, a second env raises ``ValueError``
until the first is closed, and a registered spec builds one per env. The schemas are listed
once, when the toolset is made, over a short probe connection.

Each connection runs the SDK's async client on an event loop in a thread of its own, so the
sync ``call`` and the async ``acall`` (which never blocks the caller's loop) both work and
concurrent episodes each talk to their own session. Nothing raises out of a call: a server
that does not start within ``startup_timeout``, does not answer within ``timeout``, exits, or
answers with an error gives an ``error: <tool>: ...`` observation.

Stdio servers see a minimal environment (the SDK's PATH, HOME, USER, SHELL, TERM, LOGNAME,
plus LANG) and ``env``: the host's secrets are not passed on. Streamable HTTP connects to the
``url`` given, with ``headers`` (a token, say); nothing here listens on a port.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field
from typing import Any

from palaestra.tools.function import MAX_OUTPUT_CHARS, cap, function_schema

CONNECTION_CLOSED = -32000
"""The JSON-RPC error code the SDK gives requests whose connection closed (server exited)."""

GRACE_SECONDS = 5.0
"""How much longer than its own timeouts a caller waits for the connection's thread."""

CLOSE_TIMEOUT = 10.0
"""How long ``close()`` waits for a connection to shut down (the SDK stops a stdio server
by closing its stdin, then SIGTERM, then SIGKILL, each step bounded by a few seconds)."""


class MCPServerError(RuntimeError):
    """An MCP server could not serve a request (it did not start, answer, or stay up)."""


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ImportError("MCP tools need the MCP SDK: pip install 'palaestra[mcp]'") from exc


@dataclass(frozen=True)
class MCPServer:
    """How to reach an MCP server: a ``command`` run over stdio, or a streamable HTTP ``url``.

    >>> MCPServer(command="uvx", args=["mcp-server-time"])
    MCPServer(command='uvx', args=('mcp-server-time',), cwd=None, url=None, quiet=False)
    >>> MCPServer(url="http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer ..."}).url
    'http://127.0.0.1:8000/mcp'

    Args:
        command: the executable that starts a stdio server.
        args: its arguments.
        env: variables the server gets beside a minimal environment (never the host's).
        cwd: its working directory.
        url: the endpoint of a streamable HTTP server (``http://`` or ``https://``).
        headers: HTTP headers sent with every request (authorization); kept out of reprs.
        quiet: discard a stdio server's stderr (its logs) instead of passing it on.
    """

    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    quiet: bool = False

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "MCPServer needs exactly one of command=... (a stdio server) or "
                "url=... (a streamable HTTP server)"
            )
        if isinstance(self.args, str) or not all(isinstance(a, str) for a in self.args):
            raise TypeError(f"args must be a list of strings, got {self.args!r}")
        object.__setattr__(self, "args", tuple(self.args))
        for name in ("env", "headers"):
            value = getattr(self, name)
            if value is not None and not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            ):
                raise TypeError(f"{name} must map strings to strings")
        if self.url is not None:
            if not re.match(r"https?://", self.url):
                raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
            if self.env is not None or self.cwd is not None:
                raise ValueError("env and cwd apply to stdio servers (command=...), not to a url")
        elif self.headers is not None:
            raise ValueError("headers apply to a url server, not to a stdio command")

    def __str__(self) -> str:
        if self.url is not None:
            return self.url.split("?", 1)[0]  # a query string may carry a token
        words = shlex.join([os.path.basename(self.command or ""), *self.args])
        return repr(words if len(words) <= 60 else words[:57] + "...")

    def environment(self) -> dict[str, str]:
        """Variables a stdio server gets on top of the SDK's minimal set (PATH, HOME, ...)."""
        inherited = {key: os.environ[key] for key in ("LANG",) if key in os.environ}
        return {**inherited, **(self.env or {})}


def _error_sink(quiet: bool) -> Any:
    """Where a stdio server's stderr goes: ours (when it is a real file) or nowhere."""
    if not quiet:
        for stream in (sys.stderr, sys.__stderr__):
            with contextlib.suppress(AttributeError, OSError, ValueError):
                stream.fileno()
                return stream
    return subprocess.DEVNULL


@contextlib.asynccontextmanager
async def _open_streams(server: MCPServer) -> AsyncIterator[tuple[Any, Any]]:
    """The read and write streams of an SDK transport to ``server``."""
    if server.command is not None:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=server.environment(),
            cwd=server.cwd,
        )
        async with stdio_client(params, errlog=_error_sink(server.quiet)) as streams:
            yield streams[0], streams[1]
        return
    from mcp.client import streamable_http

    headers = dict(server.headers or {})
    if hasattr(streamable_http, "streamable_http_client"):  # newer SDKs take an HTTP client
        from mcp.shared._httpx_utils import create_mcp_http_client

        async with (
            create_mcp_http_client(headers=headers) as client,
            streamable_http.streamable_http_client(server.url, http_client=client) as streams,
        ):
            yield streams[0], streams[1]
    else:
        async with streamable_http.streamablehttp_client(server.url, headers=headers) as streams:
            yield streams[0], streams[1]


def _describe(error: BaseException) -> str:
    """``Type: message`` of the first leaf of (nested) exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _connection_closed(error: BaseException) -> bool:
    import anyio

    code = getattr(getattr(error, "error", None), "code", None)
    closed = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
    return code == CONNECTION_CLOSED or isinstance(error, closed)


def _page(session: Any, cursor: str | None) -> dict[str, Any]:
    """``list_tools`` keywords for the page at ``cursor`` (older SDKs take a bare cursor)."""
    if cursor is None:
        return {}
    if "params" not in inspect.signature(session.list_tools).parameters:
        return {"cursor": cursor}
    from mcp.types import PaginatedRequestParams

    return {"params": PaginatedRequestParams(cursor=cursor)}


async def _cancel_remaining_tasks() -> None:
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class _Connection:
    """One client session with an MCP server, on an event loop in a thread of its own.

    The SDK's transports and session are async context managers that must be entered and left
    by one task, so one task (``_serve``) holds them open until :meth:`stop`; requests run as
    other tasks on the same loop, submitted from any thread.
    """

    def __init__(self, server: MCPServer, startup_timeout: float) -> None:
        self.server = server
        self.startup_timeout = startup_timeout
        self.failure: str | None = None
        """Why the connection can serve no more requests (set once it failed)."""
        self._session: Any = None
        self._ready = asyncio.Event()
        self._stopping = asyncio.Event()
        self._lock = threading.Lock()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="palaestra-mcp", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            # Requests still pending (submitted as the session closed) end cancelled.
            self._loop.run_until_complete(_cancel_remaining_tasks())
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    async def _serve(self) -> None:
        import anyio
        from mcp import ClientSession

        try:
            async with (
                _open_streams(self.server) as (read, write),
                ClientSession(read, write) as session,
            ):
                try:
                    with anyio.fail_after(self.startup_timeout):
                        await session.initialize()
                except TimeoutError:
                    self.failure = f"did not start within {self.startup_timeout:g} s"
                    return
                self._session = session
                self._ready.set()
                await self._stopping.wait()
        except Exception as error:
            if self.failure is None:
                started = self._session is not None
                self.failure = f"{'failed' if started else 'did not start'}: {_describe(error)}"
        finally:
            with self._lock:
                self._closed = True
            if self.failure is None and self._session is None:
                self.failure = "closed before it started"
            self._ready.set()

    @property
    def running(self) -> bool:
        """Whether the connection's thread still runs (shutting down counts)."""
        return self._thread.is_alive()

    def submit(self, request: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> Future[Any]:
        """Run ``request(*args)`` on the connection's loop; a closed connection fails at once."""
        with self._lock:
            if not self._closed:
                return asyncio.run_coroutine_threadsafe(request(*args), self._loop)
        future: Future[Any] = Future()
        future.set_exception(MCPServerError(self.failure or "closed the connection"))
        return future

    def stop(self) -> None:
        """Ask the session to close and return at once (:meth:`join` waits for it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # under the lock: the loop is still running, as _serve has not reached its finally
            self._loop.call_soon_threadsafe(self._stopping.set)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    async def session(self) -> Any:
        """The initialized SDK session, once it is; :class:`MCPServerError` if it failed."""
        await self._ready.wait()
        if self.failure is not None:
            raise MCPServerError(self.failure)
        return self._session

    async def list_tools(self, timeout: float) -> list[dict[str, Any]]:
        """Every tool the server offers, as JSON (following pagination cursors)."""
        session = await self.session()
        tools: list[dict[str, Any]] = []
        cursor = None
        while True:
            result = await self._request(session.list_tools(**_page(session, cursor)), timeout)
            tools += [tool.model_dump(by_alias=True, mode="json") for tool in result.tools]
            cursor = getattr(result, "next_cursor", getattr(result, "nextCursor", None))
            if not cursor:
                return tools

    async def call_tool(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        """The server's ``CallToolResult`` as JSON (camelCase keys)."""
        session = await self.session()
        result = await self._request(session.call_tool(name, arguments), timeout)
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _request(self, request: Coroutine[Any, Any, Any], timeout: float) -> Any:
        """Await an SDK request; every way it can fail becomes an :class:`MCPServerError`."""
        import anyio

        try:
            with anyio.fail_after(timeout):
                return await request
        except TimeoutError:
            raise MCPServerError(f"did not answer within {timeout:g} s") from None
        except Exception as error:
            if _connection_closed(error):
                self.failure = "closed the connection (it may have crashed)"
                raise MCPServerError(self.failure) from None
            if hasattr(error, "error"):  # a JSON-RPC error response
                raise MCPServerError(f"refused the request: {error}") from None
            raise MCPServerError(f"failed: {_describe(error)}") from None


def _wait(future: Future[Any], patience: float) -> Any:
    """The result of a request from sync code, waiting at most ``patience`` seconds."""
    try:
        return future.result(timeout=patience)
    except TimeoutError:
        future.cancel()
        raise MCPServerError(f"did not answer within {patience:g} s") from None
    except CancelledError:
        raise MCPServerError("closed the connection before answering") from None


async def _await(future: Future[Any], patience: float) -> Any:
    """The result of a request from async code, without blocking the caller's loop."""
    try:
        return await asyncio.wait_for(asyncio.wrap_future(future), patience)
    except TimeoutError:
        raise MCPServerError(f"did not answer within {patience:g} s") from None
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the caller was cancelled, not the request
        raise MCPServerError("closed the connection before answering") from None


def _validator(schema: dict[str, Any]) -> Any:
    """A JSON-schema validator of a tool's arguments, or None (no jsonschema, bad schema)."""
    try:
        import jsonschema
        from referencing import Registry
    except ImportError:
        return None
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return None  # the server validates
    return cls(schema, registry=Registry())  # an empty registry: no $ref is fetched


def _argument_problem(error: Any) -> str:
    if error.validator == "required":
        missing = re.match(r"'(.+)' is a required property", error.message)
        if missing and not error.path:
            return f"missing argument {missing.group(1)!r}"
    if error.path:
        location = ".".join(str(part) for part in error.path)
        return f"argument {location!r}: {error.message}"
    return error.message


def _describe_content(item: dict[str, Any]) -> str:
    """Text content as it is; anything else as a short note of what it was."""
    kind = item.get("type")
    if kind == "text":
        return str(item.get("text", ""))
    if kind in ("image", "audio"):
        size = len(item.get("data", "")) * 3 // 4
        return f"[{kind}: {item.get('mimeType', 'unknown type')}, {size} bytes]"
    if kind == "resource":
        resource = item.get("resource", {})
        if "text" in resource:
            return str(resource["text"])
        return f"[resource {resource.get('uri', '')} ({resource.get('mimeType', 'binary')})]"
    if kind == "resource_link":
        return f"[resource link: {item.get('name', '')} <{item.get('uri', '')}>]"
    return f"[{kind} content]"


def render_result(name: str, result: dict[str, Any], max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """The observation for a ``CallToolResult`` (as JSON): its text content, joined by lines
    (other content noted briefly; structured content when there is nothing else), prefixed
    ``error: <name>: `` when the tool reported an error, capped at ``max_chars``."""
    parts = [_describe_content(item) for item in result.get("content") or []]
    if not parts and result.get("structuredContent") is not None:
        parts = [json.dumps(result["structuredContent"], ensure_ascii=False)]
    text = "\n".join(parts) or "(no output)"
    if result.get("isError"):
        text = f"error: {name}: {text}"
    return cap(text, max_chars)


class MCPTool:
    """One tool of an MCP server; its connection belongs to its :class:`MCPToolset`."""

    def __init__(self, toolset: MCPToolset, spec: dict[str, Any], name: str) -> None:
        self.toolset = toolset
        self.name = name
        self.remote_name: str = spec["name"]
        self.description: str = spec.get("description") or spec.get("title") or ""
        self.input_schema: dict[str, Any] = spec.get("inputSchema") or {"type": "object"}
        self._validator = _validator(self.input_schema)

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r}, server={self.toolset.server})"

    @property
    def schema(self) -> dict[str, Any]:
        return function_schema(self.name, self.description, self.input_schema)

    def _check(self, arguments: Any) -> str | None:
        """The error text for arguments that do not fit the tool's schema, else None."""
        if not isinstance(arguments, dict):
            return f"error: {self.name}: arguments must be a JSON object, got {type(arguments).__name__}"
        problems = self._schema_problems(arguments)
        if problems is None:
            return None
        return cap(f"error: {self.name}: {problems}", self.toolset.max_output_chars)

    def _schema_problems(self, arguments: dict[str, Any]) -> str | None:
        """What does not fit the tool's input schema (the server checks what we cannot)."""
        if self._validator is None:
            return None
        try:
            errors = list(self._validator.iter_errors(arguments))
        except Exception:  # a schema it cannot apply (an unresolvable $ref): the server checks
            return None
        if not errors:
            return None
        errors.sort(key=lambda e: [str(part) for part in e.path])
        return "; ".join(_argument_problem(e) for e in errors)

    def _submit(self, arguments: dict[str, Any]) -> tuple[_Connection, Future[Any]]:
        connection = self.toolset._connection()
        request = connection.call_tool
        return connection, connection.submit(
            request, self.remote_name, arguments, self.toolset.timeout
        )

    def _failure(self, connection: _Connection | None, error: Exception) -> str:
        if not isinstance(error, MCPServerError):
            error = MCPServerError(f"failed: {_describe(error)}")
        if connection is not None:
            error = self.toolset._explain(connection, error)
        text = f"error: {self.name}: MCP server {self.toolset.server} {error}"
        return cap(text, self.toolset.max_output_chars)

    def call(self, arguments: dict[str, Any]) -> str:
        problem = self._check(arguments)
        if problem:
            return problem
        connection = None
        try:
            connection, future = self._submit(arguments)
            result = _wait(future, self.toolset.patience)
        except Exception as error:
            return self._failure(connection, error)
        return render_result(self.name, result, self.toolset.max_output_chars)

    async def acall(self, arguments: dict[str, Any]) -> str:
        problem = self._check(arguments)
        if problem:
            return problem
        connection = None
        try:
            connection, future = self._submit(arguments)
            result = await _await(future, self.toolset.patience)
        except Exception as error:
            return self._failure(connection, error)
        return render_result(self.name, result, self.toolset.max_output_chars)

    def attach(self, env: object) -> None:
        """Record that ``env`` uses this tool (see :meth:`MCPToolset.attach`)."""
        self.toolset.attach(env)

    def reset(self) -> None:
        """Start a new episode: closes the toolset's per-episode connection (if it has one)."""
        self.toolset.reset()

    def close(self) -> None:
        """Close the toolset's connections (a later call opens a new one)."""
        self.toolset.close()


class MCPToolset:
    """The tools of one MCP server (its tools share the server's connection).

    ``server`` is an :class:`MCPServer` or its fields as a mapping (plain data, so
    ``{"name": "mcp", "server": {...}, ...}`` is a tool spec that
    :class:`~palaestra.envs.tool_env.ToolEnv` and registered wrapper stacks take).

    Args:
        server: how to reach the server.
        per_episode: a connection (for stdio, a process) per episode instead of a shared one.
        include: the server's tools to offer (default all of them).
        prefix: put before every tool name (keeps two servers' tools apart).
        timeout: seconds a call may take before it gives an error observation.
        startup_timeout: seconds the server may take to start and initialize.
        max_output_chars: the longest observation; longer ones are cut.
    """

    def __init__(
        self,
        server: MCPServer | Mapping[str, Any],
        *,
        per_episode: bool = False,
        include: Sequence[str] | None = None,
        prefix: str = "",
        timeout: float = 30.0,
        startup_timeout: float = 30.0,
        max_output_chars: int = MAX_OUTPUT_CHARS,
    ) -> None:
        _require_sdk()
        if timeout <= 0 or startup_timeout <= 0:
            raise ValueError(f"timeouts must be > 0 seconds, got {timeout}, {startup_timeout}")
        self.server = server if isinstance(server, MCPServer) else MCPServer(**server)
        self.per_episode = per_episode
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.max_output_chars = max_output_chars
        self._lock = threading.Lock()
        self._live: _Connection | None = None
        self._retired: list[_Connection] = []
        self._env: weakref.ref[object] | None = None
        try:
            self.tools: list[MCPTool] = self._make_tools(include, prefix)
        except BaseException:
            self.close()  # the probe's server must not outlive a failed construction
            raise

    def __repr__(self) -> str:
        lifetime = "per episode" if self.per_episode else "shared"
        return f"MCPToolset({self.server}, {lifetime}, tools={[t.name for t in self.tools]})"

    @property
    def patience(self) -> float:
        """The longest a caller waits for one call: start-up, the call, and a grace period."""
        return self.startup_timeout + self.timeout + GRACE_SECONDS

    def _make_tools(self, include: Sequence[str] | None, prefix: str) -> list[MCPTool]:
        probe = _Connection(self.server, self.startup_timeout)
        try:
            specs = _wait(probe.submit(probe.list_tools, self.timeout), self.patience)
        except MCPServerError as error:
            raise MCPServerError(f"MCP server {self.server} {error}") from None
        finally:
            self._retire(probe)
        available = [spec["name"] for spec in specs]
        if include is not None:
            unknown = sorted(set(include) - set(available))
            if unknown:
                raise ValueError(
                    f"MCP server {self.server} has no tool {unknown}; it has {available}"
                )
            specs = [spec for spec in specs if spec["name"] in include]
        return [MCPTool(self, spec, prefix + spec["name"]) for spec in specs]

    def _connection(self) -> _Connection:
        """The connection calls go to now, opened if there is none (without waiting for it).

        A shared connection that failed is replaced; a per-episode one stays failed until
        :meth:`reset`, so an episode never continues on a fresh server's state."""
        with self._lock:
            live = self._live
            if live is None or (live.failure is not None and not self.per_episode):
                if live is not None:
                    self._retire(live)
                live = self._live = _Connection(self.server, self.startup_timeout)
            return live

    def _explain(self, connection: _Connection, error: MCPServerError) -> MCPServerError:
        """The error a call gets; once the connection failed, it says when a new one starts."""
        if connection.failure is not None:
            when = "next episode" if self.per_episode else "next call"
            return MCPServerError(f"{error}; it restarts with the {when}")
        return error

    def _retire(self, connection: _Connection) -> None:
        """Stop ``connection`` without waiting; :meth:`close` waits for it."""
        connection.stop()
        self._retired = [c for c in self._retired if c.running] + [connection]

    def attach(self, env: object) -> None:
        """Record that ``env`` uses this toolset. A per-episode toolset serves one env at a
        time: its connection holds one episode's state, and a second env's resets and calls
        would mix into it, so attaching another env while the first is alive and not closed
        raises. A shared toolset serves any number of envs."""
        if not self.per_episode:
            return
        with self._lock:
            current = self._env() if self._env is not None else None
            if current is not None and current is not env:
                raise ValueError(
                    f"the per-episode MCP toolset of {self.server} already serves {current!r}; "
                    "two envs would mix their episodes' state in one connection. Give each env "
                    "its own toolset (a spec {'name': 'mcp', ...} builds one per env), or close "
                    "the other env first"
                )
            self._env = weakref.ref(env)

    def reset(self) -> None:
        """Start a new episode: a per-episode connection closes (a shared one stays open)."""
        if not self.per_episode:
            return
        with self._lock:
            live, self._live = self._live, None
            if live is not None:
                self._retire(live)

    def close(self) -> None:
        """Close every connection and wait (bounded) until stdio servers have exited."""
        with self._lock:
            connections = [c for c in (self._live, *self._retired) if c is not None]
            self._live, self._retired, self._env = None, [], None
        for connection in connections:
            connection.stop()
        for connection in connections:
            connection.join(CLOSE_TIMEOUT)

    def __enter__(self) -> MCPToolset:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
