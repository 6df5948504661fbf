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


def test_a_completion_stops_where_the_token_budget_leaves_no_room(tiny_model, qwen25_tokenizer):
    import asyncio

    from palaestra.agents.base import Conversation
    from palaestra.agents.hf import HFAgent

    agent = HFAgent(
        tiny_model, tokenizer=qwen25_tokenizer, sampling=Sampling(max_tokens=40, temperature=1.0)
    )
    conversation = Conversation([{"role": "user", "content": "hi"}], seed=0)
    conversation.max_tokens = 3
    action = asyncio.run(agent.act(conversation))
    assert len(action.token_ids) <= 3


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


def _answer_together(agent, conversations):
    import asyncio

    async def all_at_once():
        return await asyncio.gather(*(agent.act(c) for c in conversations))

    return asyncio.run(all_at_once())


def _answer_alone(model, tokenizer, sampling, conversations, **options):
    import asyncio

    from palaestra.agents.hf import HFAgent

    single = HFAgent(model, tokenizer=tokenizer, sampling=sampling, max_batch=1, **options)
    actions = [asyncio.run(single.act(c)) for c in conversations]
    assert set(single.step_rows) == {1}
    return actions


def _assert_same_actions(got, expected) -> None:
    for a, b in zip(got, expected, strict=True):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_concurrent_requests_share_steps_and_sample_as_if_alone(tiny_model, qwen25_tokenizer):
    from palaestra.agents.hf import HFAgent

    sampling = Sampling(max_tokens=8, temperature=0.8, top_p=0.9)
    batched = HFAgent(tiny_model, tokenizer=qwen25_tokenizer, sampling=sampling)
    together = _answer_together(batched, _conversations(qwen25_tokenizer, 8))
    assert max(batched.step_rows) > 1
    alone = _answer_alone(
        tiny_model, qwen25_tokenizer, sampling, _conversations(qwen25_tokenizer, 8)
    )
    _assert_same_actions(together, alone)
    assert len({tuple(a.token_ids) for a in together}) > 1


def test_a_row_leaves_the_decode_as_soon_as_it_is_done(tiny_model, qwen25_tokenizer):
    from palaestra.agents.hf import HFAgent

    sampling = Sampling(max_tokens=40, temperature=1.0)
    agent = HFAgent(tiny_model, tokenizer=qwen25_tokenizer, sampling=sampling)
    actions = _answer_together(agent, _conversations(qwen25_tokenizer, 12))
    lengths = [len(a.token_ids) for a in actions]
    assert min(lengths) < max(lengths) == 40  # some stop early
    # every decode step feeds the last sampled token of rows still running, nothing else
    assert sum(rows * steps for rows, steps in agent.step_rows.items()) == sum(
        n - 1 for n in lengths
    )
    _assert_same_actions(
        actions,
        _answer_alone(tiny_model, qwen25_tokenizer, sampling, _conversations(qwen25_tokenizer, 12)),
    )


async def _started(agent, conversation, steps: int):
    """``agent.act(conversation)`` as a task, once the decode has run ``steps`` steps."""
    import asyncio

    task = asyncio.ensure_future(agent.act(conversation))
    while sum(agent.step_rows.values()) < steps:
        await asyncio.sleep(0.001)
    return task


def test_a_request_joins_a_running_decode_between_two_steps(tiny_model, qwen25_tokenizer):
    import asyncio

    from palaestra.agents.hf import HFAgent

    sampling = Sampling(max_tokens=48, temperature=0.0)
    # no stop token can be sampled: the first completion runs all 48 steps
    agent = HFAgent(
        tiny_model, tokenizer=qwen25_tokenizer, sampling=sampling, stop_token_ids=[10**6]
    )
    first, late = _conversations(qwen25_tokenizer, 2)

    async def late_arrival():
        running = await _started(agent, first, steps=5)
        joined = await agent.act(late)
        return await running, joined

    together = asyncio.run(late_arrival())
    # the late request decoded beside the running one (not after it), then alone
    assert agent.step_rows[1] >= 5 and agent.step_rows[2] > 0
    alone = _answer_alone(
        tiny_model,
        qwen25_tokenizer,
        sampling,
        _conversations(qwen25_tokenizer, 2),
        stop_token_ids=[10**6],
    )
    _assert_same_actions(together, alone)


def test_a_request_that_fails_to_join_leaves_the_running_decode_alone(tiny_model, qwen25_tokenizer):
    import asyncio

    from palaestra.agents.base import Conversation
    from palaestra.agents.hf import HFAgent

    sampling = Sampling(max_tokens=32, temperature=0.0)
    agent = HFAgent(
        tiny_model, tokenizer=qwen25_tokenizer, sampling=sampling, stop_token_ids=[10**6]
    )
    (conversation,) = _conversations(qwen25_tokenizer, 1)

    async def bad_arrival():
        running = await _started(agent, conversation, steps=3)
        with pytest.raises(IndexError):
            await agent.act(Conversation([], prompt_ids=[10**6], seed=(0,)))
        return await running

    action = asyncio.run(bad_arrival())
    _assert_same_actions(
        [action],
        _answer_alone(
            tiny_model,
            qwen25_tokenizer,
            sampling,
            _conversations(qwen25_tokenizer, 1),
            stop_token_ids=[10**6],
        ),
    )


def test_a_weight_load_waits_for_the_running_decode_and_later_requests_use_it(
    qwen25_tokenizer,
):
    import asyncio
    import copy

    from palaestra.agents.hf import HFAgent
    from palaestra.trainers.tiny import tiny_qwen2

    old, new = (tiny_qwen2(len(qwen25_tokenizer), seed=s).eval() for s in (0, 1))
    sampling = Sampling(max_tokens=64, temperature=1.0)
    agent = HFAgent(
        copy.deepcopy(old), tokenizer=qwen25_tokenizer, sampling=sampling, stop_token_ids=[10**6]
    )
    first, later = _conversations(qwen25_tokenizer, 2)

    async def load_while_decoding():
        running = await _started(agent, first, steps=3)
        load = asyncio.ensure_future(asyncio.to_thread(agent.load_weights, new.state_dict()))
        await asyncio.sleep(0.05)  # the load is waiting for the running completion
        after = await agent.act(later)
        await load
        return await running, after

    got = asyncio.run(load_while_decoding())
    first, later = _conversations(qwen25_tokenizer, 2)  # fresh rngs, seeded as before
    options = {"stop_token_ids": [10**6]}
    _assert_same_actions(
        got,
        _answer_alone(old, qwen25_tokenizer, sampling, [first], **options)
        + _answer_alone(new, qwen25_tokenizer, sampling, [later], **options),
    )


def test_a_model_whose_cache_cannot_be_joined_decodes_arrivals_together(qwen25_tokenizer):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from palaestra.agents.hf import HFAgent

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(qwen25_tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=64,
        use_sliding_window=True,
        sliding_window=8,
        max_window_layers=0,
    )
    model = Qwen2ForCausalLM(config).eval()
    sampling = Sampling(max_tokens=12, temperature=1.0)
    agent = HFAgent(model, tokenizer=qwen25_tokenizer, sampling=sampling)
    together = _answer_together(agent, _conversations(qwen25_tokenizer, 4))
    assert max(agent.step_rows) == 4
    alone = _answer_alone(model, qwen25_tokenizer, sampling, _conversations(qwen25_tokenizer, 4))
    _assert_same_actions(together, alone)


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
