"""Build an agent from a spec string, as the CLI takes it."""

from __future__ import annotations

from typing import Any

from palaestra.agents.base import Agent
from palaestra.agents.simple import HumanAgent, OracleAgent, RandomAgent

SPEC_HELP = (
    "oracle | random | human | openai:MODEL@URL (e.g. openai:Qwen/Qwen3-0.6B@http://localhost:8000/v1;"
    " URL1,URL2,... routes episodes over several servers) | vllm:PATH | hf:PATH"
)


def make_agent(spec: str, **options: Any) -> Agent:
    """An agent from ``spec``; ``options`` go to the backend's constructor.

    >>> make_agent("oracle").name
    'oracle'
    """
    kind, _, rest = spec.partition(":")
    if kind in ("oracle", "random", "human"):
        if rest:
            raise ValueError(f"agent spec {spec!r}: {kind!r} takes no argument")
        options.pop("sampling", None)  # these agents do not sample from a model
        if options:
            raise ValueError(f"agent {kind!r} takes no options, got {sorted(options)}")
        return {"oracle": OracleAgent, "random": RandomAgent, "human": HumanAgent}[kind]()
    if not rest:
        raise ValueError(f"unknown agent spec {spec!r}; expected one of: {SPEC_HELP}")
    if kind == "openai":
        from palaestra.agents.openai import OpenAIAgent

        model, at, url = rest.rpartition("@")
        if not at or not model or not url:
            raise ValueError(
                f"agent spec {spec!r}: write openai:MODEL@URL, e.g. openai:my-model@http://localhost:8000/v1"
            )
        if "," in url:
            from palaestra.agents.router import RouterAgent

            return RouterAgent.from_urls(model, url.split(","), **options)
        return OpenAIAgent(model=model, base_url=url, **options)
    if kind == "vllm":
        from palaestra.agents.vllm import VLLMAgent

        return VLLMAgent(rest, **options)
    if kind == "hf":
        from palaestra.agents.hf import HFAgent

        return HFAgent(rest, **options)
    raise ValueError(f"unknown agent kind {kind!r} in {spec!r}; expected one of: {SPEC_HELP}")
