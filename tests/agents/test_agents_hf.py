"""The transformers agent on a tiny random-init Qwen2: token-exact episodes and logprobs."""

from __future__ import annotations

import pytest

from palaestra.agents.base import Sampling
from palaestra.runner import Runner, make_tasks

torch = pytest.importorskip(
    "torch", reason="the HF agent needs torch (pip install 'palaestra[hf]')"
)
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny_model(qwen25_tokenizer):
    from palaestra.trainers.tiny import tiny_qwen2

    return tiny_qwen2(len(qwen25_tokenizer), max_positions=2048).eval()


def test_recorded_logprobs_match_a_teacher_forced_forward_pass(tiny_model, qwen25_tokenizer):
    from palaestra.agents.hf import HFAgent

    agent = HFAgent(
        tiny_model, tokenizer=qwen25_tokenizer, sampling=Sampling(max_tokens=6, temperature=0.0)
    )
    (episode,) = Runner(agent, max_turns=3).run(make_tasks(["game:GuessTheNumber-v0"], [0]))
    assert episode.error is None and episode.num_turns == 3
    ids = torch.tensor([episode.token_ids])
    with torch.no_grad():
        logits = tiny_model(ids).logits[0].float()
    expected = torch.log_softmax(logits[:-1], dim=-1).gather(1, ids[0, 1:, None])[:, 0]
    positions = [i for i, m in enumerate(episode.loss_mask) if m == 1]
    assert len(positions) == sum(len(t.token_ids) for t in episode.turns) > 0
    recorded = torch.tensor([episode.logprobs[i] for i in positions])
    assert torch.allclose(recorded, expected[torch.tensor(positions) - 1], atol=1e-4)
    for turn in episode.turns:
        assert turn.finish_reason in ("stop", "length")
        assert len(turn.token_ids) <= 6


def test_sampling_is_reproducible_per_seed(tiny_model, qwen25_tokenizer):
    from palaestra.agents.hf import HFAgent

    agent = HFAgent(tiny_model, tokenizer=qwen25_tokenizer, sampling=Sampling(max_tokens=5))
    tasks = make_tasks(["game:GuessTheNumber-v0"], [3], group_size=2)
    first = Runner(agent, max_turns=2).run(tasks)
    second = Runner(agent, max_turns=2).run(tasks)
    assert [e.token_ids for e in first] == [e.token_ids for e in second]
    assert first[0].token_ids != first[1].token_ids  # two samples of one task differ


def test_a_conversation_without_prompt_ids_is_rendered_with_the_chat_template(
    tiny_model, qwen25_tokenizer
):
    import asyncio

    from palaestra.agents.base import Conversation
    from palaestra.agents.hf import HFAgent

    agent = HFAgent(
        tiny_model, tokenizer=qwen25_tokenizer, sampling=Sampling(max_tokens=3, temperature=0.0)
    )
    messages = [{"role": "user", "content": "Guess a number."}]
    action = asyncio.run(agent.act(Conversation(messages, seed=(0,))))
    with_ids = Conversation(
        messages,
        prompt_ids=qwen25_tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        ),
        seed=(0,),
    )
    assert action.token_ids and action.token_ids == asyncio.run(agent.act(with_ids)).token_ids
    continued = [*messages, {"role": "assistant", "content": "<search>x</search>\n\n"}]
    action = asyncio.run(agent.act(Conversation(continued, seed=(0,))))  # continues the message
    ids = qwen25_tokenizer.encode(
        qwen25_tokenizer.apply_chat_template(continued, tokenize=False, continue_final_message=True)
    )
    expected = asyncio.run(agent.act(Conversation([], prompt_ids=ids, seed=(0,))))
    assert action.token_ids == expected.token_ids
    assert action.logprobs == pytest.approx(expected.logprobs, abs=1e-5)


def _conversations(tokenizer, count: int):
    from palaestra.agents.base import Conversation

    conversations = []
    for i in range(count):
        messages = [{"role": "user", "content": "Guess a number. " * (1 + i % 4)}]
        prompt_ids = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        conversations.append(Conversation(messages, prompt_ids=prompt_ids, seed=(i,)))
    return conversations


def test_concurrent_requests_share_batches_and_sample_as_if_alone(tiny_model, qwen25_tokenizer):
    import asyncio

    from palaestra.agents.hf import HFAgent

    sampling = Sampling(max_tokens=8, temperature=0.8, top_p=0.9)
    batched = HFAgent(tiny_model, tokenizer=qwen25_tokenizer, sampling=sampling)

    async def all_at_once():
        return await asyncio.gather(*(batched.act(c) for c in _conversations(qwen25_tokenizer, 8)))

    together = asyncio.run(all_at_once())
    assert max(batched.batch_sizes) > 1
    single = HFAgent(tiny_model, tokenizer=qwen25_tokenizer, sampling=sampling, max_batch=1)
    alone = [asyncio.run(single.act(c)) for c in _conversations(qwen25_tokenizer, 8)]
    assert set(single.batch_sizes) == {1}
    for a, b in zip(together, alone, strict=True):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    assert len({tuple(a.token_ids) for a in together}) > 1


def test_sampled_logprobs_are_those_of_the_tempered_distribution(tiny_model, qwen25_tokenizer):
    import asyncio

    from palaestra.agents.hf import HFAgent

    agent = HFAgent(
        tiny_model, tokenizer=qwen25_tokenizer, sampling=Sampling(max_tokens=6, temperature=0.7)
    )
    (conversation,) = _conversations(qwen25_tokenizer, 1)
    action = asyncio.run(agent.act(conversation))
    ids = torch.tensor([list(conversation.prompt_ids) + action.token_ids])
    with torch.no_grad():
        logits = tiny_model(ids).logits[0, :-1].float() / 0.7
    expected = torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:, None])[:, 0]
    recorded = torch.tensor(action.logprobs)
    assert torch.allclose(recorded, expected[-len(action.token_ids) :], atol=1e-4)


def test_top_p_keeps_the_smallest_set_that_holds_the_mass():
    from palaestra.agents.hf import _top_p

    probs = torch.tensor([[0.1, 0.5, 0.3, 0.1], [0.25, 0.25, 0.25, 0.25]])
    kept = _top_p(probs, 0.7)
    assert kept[0].tolist() == pytest.approx([0.0, 0.5, 0.3, 0.0])
    assert (kept[1] > 0).sum() == 3  # 0.5 < 0.7 <= 0.75


def test_a_failed_batch_fails_its_requests_and_the_agent_serves_on(tiny_model, qwen25_tokenizer):
    import asyncio

    from palaestra.agents.base import Conversation
    from palaestra.agents.hf import HFAgent

    agent = HFAgent(tiny_model, tokenizer=qwen25_tokenizer, sampling=Sampling(max_tokens=2))
    out_of_vocabulary = Conversation([], prompt_ids=[10**6], seed=(0,))
    with pytest.raises(IndexError):
        asyncio.run(agent.act(out_of_vocabulary))
    (conversation,) = _conversations(qwen25_tokenizer, 1)
    assert asyncio.run(agent.act(conversation)).token_ids


def test_an_episode_cancelled_while_it_waits_leaves_its_batch_to_finish(
    tiny_model, qwen25_tokenizer
):
    import asyncio

    from palaestra.agents.hf import HFAgent

    agent = HFAgent(tiny_model, tokenizer=qwen25_tokenizer, sampling=Sampling(max_tokens=32))
    cancelled, *others = _conversations(qwen25_tokenizer, 3)

    async def cancel_one():
        waiting = [asyncio.ensure_future(agent.act(c)) for c in (cancelled, *others)]
        await asyncio.sleep(0.01)  # their batch is being generated
        waiting[0].cancel()
        return await asyncio.wait_for(asyncio.gather(*waiting[1:]), timeout=60)

    assert all(action.token_ids for action in asyncio.run(cancel_one()))
    assert sum(agent.batch_sizes.values()) == 1  # the three shared one batch
