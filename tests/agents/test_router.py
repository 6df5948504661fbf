"""Several engines behind one agent: balanced, sticky per episode, failing over."""

from __future__ import annotations

import asyncio

import pytest

from palaestra.agents.base import Action, Conversation
from palaestra.agents.router import RouterAgent
from palaestra.agents.spec import make_agent
from palaestra.runner import Runner, make_tasks
from tests.openai_stub import StubServer


class RecordingEngine:
    """Answers ``\\boxed{25}`` after a short wait, recording which episode called it."""

    def __init__(self, calls: list, name: str, *, broken: bool = False):
        """``calls`` is shared by the engines of a test: (episode number, engine name)."""
        self.calls, self.name, self.broken = calls, name, broken

    async def act(self, conversation: Conversation) -> Action:
        await asyncio.sleep(0.001)
        if self.broken:
            raise ConnectionError(f"{self.name} is down")
        episode = conversation.state.setdefault("episode", len(self.calls))
        self.calls.append((episode, self.name))
        return Action("\\boxed{25}")


def _engines_per_episode(calls: list) -> dict[int, set[str]]:
    per_episode: dict[int, set[str]] = {}
    for episode, engine in calls:
        per_episode.setdefault(episode, set()).add(engine)
    return per_episode


def test_each_episode_sticks_to_one_engine_and_load_is_spread():
    calls: list = []
    router = RouterAgent([RecordingEngine(calls, name) for name in "abc"])
    episodes = Runner(router, concurrency=6).run(make_tasks(["game:GuessTheNumber-v0"], range(12)))
    assert all(e.error is None and e.num_turns > 1 for e in episodes)
    per_episode = _engines_per_episode(calls)
    assert len(per_episode) == 12
    assert all(len(engines) == 1 for engines in per_episode.values())
    assert router.episodes == [4, 4, 4]


def test_a_failing_engine_is_skipped_and_its_episodes_move():
    calls: list = []
    engines = [RecordingEngine(calls, "down", broken=True), RecordingEngine(calls, "up")]
    router = RouterAgent(engines, cooldown_s=60)
    episodes = Runner(router, concurrency=1).run(make_tasks(["game:GuessTheNumber-v0"], range(8)))
    assert all(e.error is None for e in episodes)
    assert {engine for _, engine in calls} == {"up"}
    assert router.episodes == [1, 8]  # tried once, then left alone during its cool-down


def test_every_engine_failing_errors_the_episode():
    router = RouterAgent([RecordingEngine([], name, broken=True) for name in "ab"])
    (episode,) = Runner(router).run(make_tasks(["game:GuessTheNumber-v0"], [0]))
    assert "is down" in episode.error


def test_openai_engines_by_url():
    with StubServer() as first, StubServer() as second:
        router = RouterAgent.from_urls("stub", [first.url, second.url])
        episodes = Runner(router, concurrency=4).run(
            make_tasks(["game:GuessTheNumber-v0"], range(8))
        )
    assert all(e.success for e in episodes)
    assert first.requests and second.requests
    assert len(first.requests) + len(second.requests) == sum(e.num_turns for e in episodes)


def test_agent_spec_with_several_urls_routes_over_them():
    agent = make_agent("openai:m@http://a:8000/v1,http://b:8000/v1")
    assert isinstance(agent, RouterAgent)
    assert [engine.base_url for engine in agent.engines] == ["http://a:8000/v1", "http://b:8000/v1"]


def test_needs_an_engine():
    with pytest.raises(ValueError, match="at least one engine"):
        RouterAgent([])
