"""Build an agent from a spec string, as the CLI takes it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from palaestra.agents.base import Agent
from palaestra.agents.simple import HumanAgent, OracleAgent, RandomAgent

SPEC_HELP = (
    "oracle | random | human | openai:MODEL@URL (e.g. openai:Qwen/Qwen3-0.6B@http://localhost:8000/v1;"
    " URL1,URL2,... routes episodes over several servers) | vllm:PATH | hf:PATH"
)

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
"""``org/name``: a Hugging Face Hub id (a path that does not exist locally may be one)."""


def model_path_problem(path: str, *, what: str) -> str | None:
    """Why ``path`` cannot be a model (``what`` names where it came from), or None: a local
    directory needs a ``config.json``; a path that does not exist must look like a Hub id.

    >>> model_path_problem("/nowhere/model", what="hf:/nowhere/model")[:40]
    "hf:/nowhere/model: no model at '/nowhere"
    """
    local = Path(path).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            return f"{what}: {path} holds no config.json: give a Hugging Face model directory"
        return None
    if local.exists() or not HUB_ID.match(path):
        return (
            f"{what}: no model at {path!r}: give a local model directory (with config.json) "
            "or a Hugging Face Hub id such as Qwen/Qwen3-0.6B"
        )
    return None


def agent_spec_problem(spec: str) -> str | None:
    """What would stop ``make_agent(spec)`` after a slow start, found before it: a model path
    of ``hf:``/``vllm:`` that cannot be a model. None when nothing is found."""
    kind, _, rest = spec.partition(":")
    if kind in ("hf", "vllm") and rest:
        return model_path_problem(rest, what=f"agent {spec}")
    return None


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
