"""The HF engine's decode keeps a few fixed attention shapes, warm on its thread across
rollouts (what per-shape attention plans, such as cuDNN's on sm90, need to stay cached)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from palaestra.agents.base import Conversation, Sampling

torch = pytest.importorskip(
    "torch", reason="the HF agent needs torch (pip install 'palaestra[hf]')"
)
pytest.importorskip("transformers")

from palaestra.agents.hf import HFAgent  # noqa: E402
from palaestra.agents.hf_shapes import AttentionShapeCensus  # noqa: E402
from palaestra.trainers import tiny  # noqa: E402
from palaestra.trainers.config import TrainerConfig  # noqa: E402
from palaestra.trainers.demo import env_texts  # noqa: E402
from palaestra.trainers.trainer import Trainer  # noqa: E402

DECODE_THREAD = "palaestra-hf-generate"
ENV_ID, ENV_KWARGS = "game:GuessTheNumber-v0", {"min_number": 1, "max_number": 8, "max_turns": 1}


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """One intra-op thread: on a shared small CPU, spinning OpenMP workers make each forward
    of these tiny models ten times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tokenizer():
    return tiny.train_tokenizer(
        env_texts() + env_texts(ENV_ID, ENV_KWARGS, range(16)), vocab_size=512
    )


def _trainer(tokenizer, tmp_path, episodes: int, max_new_tokens: int) -> Trainer:
    config = TrainerConfig.model_validate(
        {
            "steps": 3,
            "output_dir": str(tmp_path / f"run-{episodes}"),
            "rollout": {
                "env_id": ENV_ID,
                "env_kwargs": ENV_KWARGS,
                "group_size": 8,
                "groups_per_step": episodes // 8,
                "max_new_tokens": max_new_tokens,
                "concurrency": episodes,
            },
            "advantage": {"estimator": "grpo"},
            "optim": {"lr": 1e-3},
            "update": {"micro_batch_size": episodes},
            "log": {"console": False},
        }
    )
    model = tiny.tiny_qwen2(len(tokenizer), hidden_size=64, max_positions=512)
    return Trainer(config, model, tokenizer)


def _new_share_after_warm_up(tokenizer, tmp_path, episodes: int, max_new_tokens: int) -> float:
    """The share of the decode thread's forwards in rollouts 2 and 3 of a trainer that meet
    an attention shape new to that thread."""
    census = AttentionShapeCensus()
    trainer = _trainer(tokenizer, tmp_path, episodes, max_new_tokens)
    with trainer, census.watch(trainer.engine.agent.model):
        trainer.train(until=1)  # the warm-up rollout
        census.clear_forwards()
        trainer.train()
    assert len(census.recorded(DECODE_THREAD, decode_only=True)) >= 2 * (max_new_tokens - 1)
    return census.new_share(DECODE_THREAD)


@pytest.mark.slow
def test_trainer_rollouts_after_a_warm_up_meet_few_new_attention_shapes(tokenizer, tmp_path):
    assert _new_share_after_warm_up(tokenizer, tmp_path, episodes=64, max_new_tokens=48) <= 0.05


@pytest.mark.slow
def test_trainer_rollouts_of_256_episodes_meet_few_new_attention_shapes(tokenizer, tmp_path):
    assert _new_share_after_warm_up(tokenizer, tmp_path, episodes=256, max_new_tokens=48) <= 0.05


def _conversations(
    tokenizer, count: int, first_seed: int = 0, budgets: tuple[int, ...] = (40,)
) -> list[Conversation]:
    """``count`` requests of three prompt lengths, request ``i`` allowed ``budgets[i % len]``
    tokens."""
    conversations = []
    for i in range(count):
        messages = [{"role": "user", "content": "Guess a number. " * (1 + i % 3)}]
        prompt_ids = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        conversation = Conversation(messages, prompt_ids=prompt_ids, seed=(first_seed + i,))
        conversation.max_tokens = budgets[i % len(budgets)]
        conversations.append(conversation)
    return conversations


async def _answer(agent: HFAgent, conversations: list[Conversation]) -> list:
    return await asyncio.gather(*(agent.act(c) for c in conversations))


def test_the_census_counts_shapes_per_thread(tokenizer):
    model = tiny.tiny_qwen2(len(tokenizer), hidden_size=64).eval()
    census = AttentionShapeCensus()
    ids = torch.tensor([[1, 2, 3]])
    attention = torch.nn.functional.scaled_dot_product_attention

    def forward() -> None:
        from transformers import DynamicCache

        with torch.no_grad():
            model(input_ids=ids, cache=DynamicCache(config=model.config))

    with census.watch(model):
        forward(), forward()
        model(input_ids=ids)  # no cache: not a generation forward
        thread = threading.Thread(target=forward, name="other")
        thread.start(), thread.join()
    assert [f.new_shape for f in census.recorded("MainThread")] == [True, False]
    assert census.new_share("other") == 1.0  # a new thread starts with no shape seen
    assert torch.nn.functional.scaled_dot_product_attention is attention  # restored


def test_one_thread_decodes_every_rollout_and_aclose_ends_it(tokenizer):
    model = tiny.tiny_qwen2(len(tokenizer), hidden_size=64).eval()
    agent = HFAgent(model, tokenizer=tokenizer, sampling=Sampling(max_tokens=8))
    census = AttentionShapeCensus()
    others = set(threading.enumerate())  # decode threads of agents other tests left open

    async def two_rollouts_then_close() -> None:
        with census.watch(model):
            await _answer(agent, _conversations(tokenizer, 6))
            census.clear_forwards()
            await _answer(agent, _conversations(tokenizer, 6, first_seed=100))
        threads = [t for t in threading.enumerate() if t.name == DECODE_THREAD and t not in others]
        await agent.aclose()
        assert threads and not any(t.is_alive() for t in threads)

    asyncio.run(two_rollouts_then_close())
    assert census.new_share(DECODE_THREAD) == 0.0  # the same thread, warm
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(agent.act(_conversations(tokenizer, 1)[0]))


def test_decode_steps_keep_one_shape_while_rows_join_and_leave(tokenizer):
    model = tiny.tiny_qwen2(len(tokenizer), hidden_size=64).eval()
    agent = HFAgent(model, tokenizer=tokenizer, sampling=Sampling(max_tokens=40))
    census = AttentionShapeCensus()

    async def staggered() -> list:
        early = _conversations(tokenizer, 3, budgets=(40, 12, 25))
        first = asyncio.ensure_future(_answer(agent, early))
        while sum(agent.step_rows.values()) < 5:
            await asyncio.sleep(0.001)
        late = await _answer(agent, _conversations(tokenizer, 2, first_seed=10, budgets=(20,)))
        return [*await first, *late]

    with census.watch(model):
        actions = asyncio.run(staggered())
    lengths = {len(a.token_ids) for a in actions}
    assert len(lengths) > 1 and len(set(agent.step_rows)) > 2  # rows left and joined
    steps = census.recorded(DECODE_THREAD, decode_only=True)
    # 4 slots, 8 if the late rows join before an early one has left; the width may grow once
    assert len(steps) >= 30 and sum(f.new_shape for f in steps) <= 3
