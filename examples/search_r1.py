"""Search-R1 against palaestra's retrieval server: the oracle, a one-search baseline and a
closed-book baseline on the synthetic multi-hop questions.

This script does not train: it measures what a search policy can reach here (oracle against
the two baselines), on CPU in seconds. Training a model on this env is ``palaestra train``
with ``rollout.env_id: search:Synthetic-SearchR1-v0`` (a model that writes tool calls, on a
GPU), or Search-R1's own trainer pointed at the same retrieval server.

The script serves the synthetic knowledge base with the retrieval server (what
``palaestra serve-retriever`` runs; Search-R1's training code could use the same URL),
points ``search:Synthetic-SearchR1-v0`` at it, and runs three policies through the runner:

* the oracle searches each gold evidence title, then answers;
* one search: searches the question once, then answers with the first document's title;
* closed book: answers without searching.

    python examples/search_r1.py --episodes 64
"""

from __future__ import annotations

import argparse
import re
import socket
import threading
import time

from palaestra.agents import Action, Conversation, OracleAgent
from palaestra.envs.search.world import build_world
from palaestra.runner import Runner, make_tasks
from palaestra.server.retriever import create_app
from palaestra.tools.search import BM25Retriever

ENV_ID = "search:Synthetic-SearchR1-v0"


class OneSearch:
    """Search the question, then answer with the title of the first document found."""

    name = "one-search"

    def act(self, conversation: Conversation) -> Action:
        if len(conversation.messages) == 1:  # only the task so far
            question = conversation.last_observation.rpartition("Question: ")[2].strip()
            return Action(f"<search>{question}</search>")
        title = re.search(r'Doc 1\(Title: "(.*?)"\)', conversation.last_observation)
        return Action(f"<answer>{title.group(1) if title else 'unknown'}</answer>")


class ClosedBook:
    """Answer at once, without searching."""

    name = "closed-book"

    def act(self, conversation: Conversation) -> Action:
        return Action("<answer>1900</answer>")


def serve(port: int) -> threading.Thread:
    """The retrieval server over the synthetic knowledge base, in a background thread."""
    import uvicorn

    app = create_app(BM25Retriever(build_world(0).docs))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return thread


def success_rates(url: str, episodes: int) -> dict[str, float]:
    """Success rate of each policy on the same ``episodes`` questions."""
    tasks = make_tasks([ENV_ID], range(episodes), env_kwargs={"retriever": url})
    rates = {}
    for agent in (OracleAgent(), OneSearch(), ClosedBook()):
        results = Runner(agent, concurrency=16).run(tasks)
        rates[agent.name] = sum(bool(e.success) for e in results) / len(results)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64)
    args = parser.parse_args()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    serve(port)
    for name, rate in success_rates(f"http://127.0.0.1:{port}/retrieve", args.episodes).items():
        print(f"{name:>12}: {rate:.2f} success")


if __name__ == "__main__":
    main()
