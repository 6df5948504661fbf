"""``palaestra serve``: envs as a network service (see :mod:`palaestra.runner.network` for the
protocol and the client)."""

from palaestra.server.run import build_server, is_loopback
from palaestra.server.sessions import ServerLimits, SessionTable

__all__ = ["ServerLimits", "SessionTable", "build_server", "is_loopback"]
