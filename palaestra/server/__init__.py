"""Network services: envs as a service (``palaestra serve``; see :mod:`palaestra.runner.network`
for the protocol and the client) and the retrieval server (``palaestra serve-retriever``)."""

from palaestra.server.run import build_server, is_loopback, serving
from palaestra.server.sessions import ServerLimits, SessionTable
from palaestra.server.stepping import Stepping

__all__ = [
    "ServerLimits",
    "SessionTable",
    "Stepping",
    "build_server",
    "is_loopback",
    "serving",
]
