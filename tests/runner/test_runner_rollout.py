"""The rollout engine: correctness, determinism, streaming without lock-step, error isolation."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

import palaestra
from palaestra.agents import (
    Action,
    Conversation,
    LatencyAgent,
    OracleAgent,
    PolicyAgent,
    RandomAgent,
)
from palaestra.core.env import Env
from palaestra.runner import Runner, Task, make_tasks


class Crashy(Env):
    """Raises on the second step when the seed is odd (a buggy env)."""

    threaded_step = False
    max_turns = 5

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._odd, self._turn = bool(seed and seed % 2), 0
        return "say anything", {}

    def step(self, action):
        self._turn += 1
        if self._odd and self._turn == 2:
            raise RuntimeError("env bug")
        done = self._turn == 3
        return "ok", 1.0 if done else 0.0, done, False, {"success": done}


@pytest.fixture(scope="module", autouse=True)
def crashy_env():
    palaestra.register("test:Crashy-v0", Crashy, override=True)
    yield
    palaestra.core.deregister("test:Crashy-v0")


def test_oracle_solves_every_game_and_results_keep_task_order():
    ids = palaestra.list_envs("game:*")
    tasks = make_tasks(ids, range(3))
    episodes = Runner(OracleAgent(), concurrency=4).run(tasks)
    assert [(e.env_id, e.seed) for e in episodes] == [(t.env_id, t.seed) for t in tasks]
    for episode in episodes:
        assert episode.error is None
        assert episode.done
        if not palaestra.make(episode.env_id).oracle_always_wins:
            continue  # chance can beat the best policy (slippery ice, hangman, a draw)
        assert episode.total_reward >= 1.0, episode.env_id
        assert episode.messages[1]["content"] == episode.task


def test_same_seeds_give_the_same_episodes_under_any_concurrency():
    tasks = make_tasks(["game:Wordle-v0", "game:TicTacToe-v0"], range(6), group_size=2)
    one = Runner(RandomAgent(), concurrency=1).run(tasks)
    many = Runner(RandomAgent(), concurrency=16).run(tasks)
    timeless = lambda e: {**e.to_dict(), "duration_s": 0.0}  # noqa: E731
    assert [timeless(e) for e in one] == [timeless(e) for e in many]
    # rollouts of one group share the task but sample different actions
    first, second = one[0], one[1]
    assert first.group_id == second.group_id and first.task == second.task
    assert [t.action for t in first.turns] != [t.action for t in second.turns]


def test_random_agent_rng_is_independent_of_the_env_rng():
    # numpy seeds s and (s, 0) give the same stream; the agent must not replay the env's draws
    episodes = Runner(RandomAgent()).run(make_tasks(["game:Wordle-v0"], range(20)))
    assert sum(e.success for e in episodes) <= 2


def test_episodes_stream_as_they_finish_without_lock_step():
    slow_seed = 0

    class SlowForOneSeed:
        async def act(self, conversation: Conversation) -> Action:
            if conversation.seed[0] == slow_seed:
                await asyncio.sleep(0.05)
            return OracleAgent().act(conversation)

    async def order():
        runner = Runner(SlowForOneSeed(), concurrency=4)
        return [
            e.seed async for e in runner.stream(make_tasks(["game:GuessTheNumber-v0"], range(8)))
        ]

    seeds = asyncio.run(order())
    assert sorted(seeds) == list(range(8))
    assert seeds[-1] == slow_seed  # the other seven finished while seed 0 was still thinking


def test_the_same_task_object_repeated_gives_one_episode_each():
    task = Task("game:GuessTheNumber-v0", seed=4)
    episodes = Runner(OracleAgent(), concurrency=3).run([task] * 5)
    assert len(episodes) == 5 and all(e.seed == 4 and e.success for e in episodes)


def test_a_failing_task_iterator_reaches_the_caller():
    def tasks():
        yield from make_tasks(["game:GuessTheNumber-v0"], range(3))
        raise LookupError("task source broke")

    async def read_all():
        return [e async for e in Runner(OracleAgent(), concurrency=2).stream(tasks())]

    with pytest.raises(LookupError, match="task source broke"):
        asyncio.run(read_all())


class AsyncOracle:
    """The oracle behind an async ``act`` that never actually waits."""

    async def act(self, conversation: Conversation) -> Action:
        return OracleAgent().act(conversation)


def _played_while_the_reader_waits(agent, env_id: str) -> tuple[int, int]:
    """(episodes read, episodes played) after reading one episode and pausing 50 ms."""
    runner = Runner(agent, concurrency=8)

    async def read_one_then_wait():
        stream = runner.stream(make_tasks([env_id], range(1000)))
        await anext(stream)
        await asyncio.sleep(0.05)  # workers, if any, run while the reader sleeps
        played = runner.stats.episodes
        await stream.aclose()
        return played

    return 1, asyncio.run(read_one_then_wait())


def test_an_unread_stream_holds_a_bounded_number_of_episodes():
    from palaestra.runner.rollout import _STREAM_WINDOW

    read, played = _played_while_the_reader_waits(AsyncOracle(), "game:GuessTheNumber-v0")
    # each worker stops once the window is full: at most one window plus one episode per
    # worker are played ahead of the reader
    assert read < played <= read + _STREAM_WINDOW + 8


def test_episodes_that_never_wait_are_played_as_the_reader_asks():
    # a plain agent on an inline env: the stream plays each episode when it is read
    read, played = _played_while_the_reader_waits(OracleAgent(), "game:GuessTheNumber-v0")
    assert played == read


class SlowThreadedStep(Env):
    """Each step blocks for 20 ms in a worker thread (like a sandbox call)."""

    max_turns = 3

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._turn = 0
        return "wait for it", {}

    def step(self, action):
        time.sleep(0.02)
        self._turn += 1
        done = self._turn == 3
        return "ok", float(done), done, False, {"success": done}


def test_a_plain_agent_on_a_threaded_env_still_runs_episodes_concurrently():
    palaestra.register("test:SlowThreadedStep-v0", SlowThreadedStep, override=True)
    try:
        tasks = make_tasks(["game:GuessTheNumber-v0", "test:SlowThreadedStep-v0"], range(8))
        start = time.perf_counter()
        episodes = Runner(PolicyAgent(lambda obs: "go"), concurrency=8).run(tasks)
        elapsed = time.perf_counter() - start
    finally:
        palaestra.core.deregister("test:SlowThreadedStep-v0")
    slow = [e for e in episodes if e.env_id == "test:SlowThreadedStep-v0"]
    assert len(episodes) == 16 and all(e.success for e in slow)
    assert elapsed < 0.6 * (8 * 3 * 0.02)  # one after another would take 0.48 s


def test_plain_and_async_agents_play_the_same_episodes():
    class Plain:
        def act(self, conversation: Conversation) -> Action:
            return Action(f"\\boxed{{{len(conversation.messages)}}}")

    class Async:
        async def act(self, conversation: Conversation) -> Action:
            return Plain().act(conversation)

    class PlainDelegatingToAsync:  # a plain act that returns a coroutine is awaited
        def act(self, conversation: Conversation):
            return Async().act(conversation)

    tasks = make_tasks(["game:GuessTheNumber-v0"], range(4))
    timeless = lambda e: {**e.to_dict(), "duration_s": 0.0}  # noqa: E731
    runs = [Runner(agent()).run(tasks) for agent in (Plain, Async, PlainDelegatingToAsync)]
    assert runs[0][0].num_turns > 1 and all(e.error is None for e in runs[0])
    assert [timeless(e) for e in runs[0]] == [timeless(e) for e in runs[1]]
    assert [timeless(e) for e in runs[0]] == [timeless(e) for e in runs[2]]


def test_an_agent_that_returns_no_action_gets_a_clear_error():
    class ReturnsText:
        def act(self, conversation: Conversation):
            return "\\boxed{3}"

    (episode,) = Runner(ReturnsText()).run(make_tasks(["game:GuessTheNumber-v0"], [0]))
    assert episode.error == "TypeError: agent.act returned str; it must return an Action"


def test_concurrency_bound_is_reached_and_never_exceeded():
    in_flight = peak = 0

    class Counting:
        async def act(self, conversation: Conversation) -> Action:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.001)
            in_flight -= 1
            return Action("\\boxed{25}")

    Runner(Counting(), concurrency=5).run(make_tasks(["game:GuessTheNumber-v0"], range(20)))
    assert peak == 5


def test_latency_agent_episodes_overlap():
    waiting = peak = 0

    class CountsWaits(LatencyAgent):
        async def act(self, conversation: Conversation) -> Action:
            nonlocal waiting, peak
            waiting += 1
            peak = max(peak, waiting)
            try:
                return await super().act(conversation)
            finally:
                waiting -= 1

    agent = CountsWaits(OracleAgent(), median_s=0.01, p99_s=0.02)
    tasks = make_tasks(["game:GuessTheNumber-v0"], range(32))
    start = time.perf_counter()
    episodes = Runner(agent, concurrency=32).run(tasks)
    elapsed = time.perf_counter() - start
    serial = 0.01 * sum(e.num_turns for e in episodes)
    assert all(e.success for e in episodes)
    assert peak > 16  # most episodes waited for their agent at once (32 on an idle machine)
    # about serial / 20 on an idle machine; the margin absorbs a loaded one
    assert elapsed < serial / 3


def test_crashing_env_or_agent_is_isolated_and_counted():
    class FailsOnSeed3:
        async def act(self, conversation: Conversation) -> Action:
            if conversation.seed[0] == 3:
                raise ValueError("agent bug")
            return Action("hi")

    runner = Runner(FailsOnSeed3(), concurrency=3)
    episodes = runner.run(make_tasks(["test:Crashy-v0"], range(6)))
    errors = {e.seed: e.error for e in episodes if e.error}
    assert errors == {
        1: "RuntimeError: env bug",
        3: "ValueError: agent bug",
        5: "RuntimeError: env bug",
    }
    assert runner.stats.errors == 3 and runner.stats.episodes == 6
    assert all(e.success and e.num_turns == 3 for e in episodes if e.seed in (0, 2, 4))


def test_turn_limit_truncates():
    episodes = Runner(PolicyAgent(lambda obs: "no idea"), max_turns=2).run(
        make_tasks(["game:GuessTheNumber-v0"], [0])
    )
    (episode,) = episodes
    assert episode.num_turns == 2
    assert episode.turns[-1].truncated and episode.truncation_reason == "runner_max_turns"
    assert episode.success is False


def test_bad_arguments_are_rejected_with_the_fix():
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        Runner(OracleAgent(), concurrency=0)
    with pytest.raises(ValueError, match="needs an agent with a tokenizer"):
        Runner(OracleAgent(), max_episode_tokens=100)


def test_token_level_episode_through_the_runner(qwen25_tokenizer):
    seen_prompts: list[list[int]] = []

    class TokenAgent:
        tokenizer = qwen25_tokenizer

        async def act(self, conversation: Conversation) -> Action:
            seen_prompts.append(list(conversation.prompt_ids))
            text = "\\boxed{" + str(25 + len(seen_prompts)) + "}"
            ids = qwen25_tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)
            return Action(text, ids, [-0.25] * len(ids), "stop")

    (episode,) = Runner(TokenAgent(), max_turns=3).run(make_tasks(["game:GuessTheNumber-v0"], [0]))
    assert len(seen_prompts) == 3
    for prompt in seen_prompts:
        assert episode.token_ids[: len(prompt)] == prompt  # every prompt is a prefix
    policy = [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if m]
    assert policy == [tid for turn in episode.turns for tid in turn.token_ids]
    assert sum(episode.loss_mask) == sum(1 for lp in episode.logprobs if lp == -0.25)
    assert max(episode.turn_index) == 2
    text = qwen25_tokenizer.decode(episode.token_ids)
    assert episode.turns[0].observation in text


def test_token_budget_truncates(qwen25_tokenizer):
    class Chatty:
        tokenizer = qwen25_tokenizer

        async def act(self, conversation: Conversation) -> Action:
            return Action("\\boxed{1}")

    runner = Runner(Chatty(), max_episode_tokens=150)
    (episode,) = runner.run([Task("game:GuessTheNumber-v0", seed=0)])
    assert episode.truncation_reason == "token_budget"
    assert episode.num_turns < 10


class CountXs(Env):
    """Rewards each action with the number of x's in it; never ends on its own."""

    threaded_step = False
    max_turns = 20

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "write x's", {}

    def step(self, action):
        return "more", float(action.count("x")), False, False, {}


class Xs:
    """Answers twenty x's, whatever room it is told it has (the runner must cut)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.rooms: list[int | None] = []

    async def act(self, conversation: Conversation) -> Action:
        self.rooms.append(conversation.max_tokens)
        ids = self.tokenizer.encode(" x" * 20 + "<|im_end|>", add_special_tokens=False)
        return Action(" x" * 20, ids, [-0.5] * len(ids), "stop")


@pytest.mark.parametrize(
    "budget", [{"max_episode_tokens": 90}, {"max_response_tokens": 70}, {"max_response_tokens": 7}]
)
def test_token_budget_ends_the_episode_while_playing(qwen25_tokenizer, budget):
    palaestra.register("test:CountXs-v0", CountXs, override=True)
    agent = Xs(qwen25_tokenizer)
    (episode,) = Runner(agent, **budget).run([Task("test:CountXs-v0", seed=0)])
    prompt = episode.loss_mask.index(1)
    limit = budget.get("max_episode_tokens", prompt + budget.get("max_response_tokens", 0))
    assert len(episode.token_ids) <= limit and episode.truncation_reason == "token_budget"
    assert episode.turns[-1].truncated and episode.error is None
    # the agent was told the room left before each action
    starts = [i for i, (a, b) in enumerate(itertools.pairwise([0, *episode.loss_mask])) if b > a]
    assert agent.rooms == [limit - start for start in starts]
    # the last completion was cut to the room, and the env stepped on what was kept
    last = episode.turns[-1]
    assert last.token_ids == episode.token_ids[starts[-1] :] and last.finish_reason == "length"
    kept = qwen25_tokenizer.decode(
        [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if m]
    )
    assert episode.total_reward == kept.count("x") < 20 * episode.num_turns


def test_a_prompt_over_the_token_budget_plays_no_turn(qwen25_tokenizer):
    palaestra.register("test:CountXs-v0", CountXs, override=True)
    (episode,) = Runner(Xs(qwen25_tokenizer), max_episode_tokens=3).run([Task("test:CountXs-v0")])
    assert episode.num_turns == 0 and episode.truncation_reason == "token_budget"


def test_process_pool_gives_the_same_episodes_as_in_process():
    tasks = make_tasks(["game:GuessTheNumber-v0", "test:Crashy-v0"], range(4))
    agent = PolicyAgent(lambda obs: "\\boxed{25}")
    local = Runner(agent).run(tasks)
    remote_runner = Runner(agent, process_workers=2)
    remote = remote_runner.run(tasks)
    strip = lambda e: {**e.to_dict(), "duration_s": 0.0}  # noqa: E731
    assert [strip(e) for e in remote] == [strip(e) for e in local]
    assert remote_runner.stats.errors == 2


def test_oracle_agent_explains_that_it_needs_an_in_process_env():
    with pytest.raises(RuntimeError, match="run it in-process"):
        OracleAgent().act(Conversation([{"role": "user", "content": "x"}]))
