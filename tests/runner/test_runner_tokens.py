"""Token-level conversation building against the real chat templates of Qwen2.5, Qwen3, Llama 3."""

from __future__ import annotations

import pytest

from palaestra.agents.base import Action
from palaestra.core.types import Episode
from palaestra.runner.tokens import ChatTokenizer, TokenRecorder

TASK = [
    {"role": "system", "content": "You are playing a guessing game."},
    {"role": "user", "content": "I am thinking of an integer between 1 and 50."},
]
ACTIONS = ["\\boxed{25}", "Let me think. \\boxed{37}", "\\boxed{31}"]
OBSERVATIONS = ["25 is too low: my number is higher.", "37 is too high.", "31 is too low."]


def play(chat: ChatTokenizer, end_token: str, actions=ACTIONS, roles=("user",) * 3):
    """Run the builder over a scripted episode whose engine ends each completion with ``end_token``."""
    sequence = chat.prompt_ids(TASK)
    history = list(TASK)
    for action, observation, role in zip(actions, OBSERVATIONS, roles, strict=False):
        completion = chat.encode(action + end_token)
        sequence = sequence + completion
        message = {"role": role, "content": observation}
        history += [{"role": "assistant", "content": action}, message]
        sequence = sequence + chat.observation_ids([message], completion)
    return sequence, history


def full_rendering(chat: ChatTokenizer, history) -> list[int]:
    return chat.encode(chat.render(history, add_generation_prompt=True))


def test_qwen25_sequence_equals_full_history_rendering(qwen25_tokenizer):
    chat = ChatTokenizer(qwen25_tokenizer)
    sequence, history = play(chat, "<|im_end|>")
    assert sequence == full_rendering(chat, history)


def test_qwen25_tool_observation_uses_the_tool_response_block(qwen25_tokenizer):
    chat = ChatTokenizer(qwen25_tokenizer)
    sequence, history = play(chat, "<|im_end|>", roles=("tool", "user", "tool"))
    assert sequence == full_rendering(chat, history)
    text = qwen25_tokenizer.decode(sequence)
    assert "<tool_response>\n25 is too low: my number is higher.\n</tool_response>" in text


def test_llama3_sequence_equals_full_history_rendering(llama3_tokenizer):
    chat = ChatTokenizer(llama3_tokenizer)
    sequence, history = play(chat, "<|eot_id|>")
    assert sequence == full_rendering(chat, history)
    assert llama3_tokenizer.decode(sequence).count("<|begin_of_text|>") == 1


def test_llama3_keeps_whitespace_the_template_would_trim(llama3_tokenizer):
    """By design: the policy generated the trailing spaces, so they stay in its sequence."""
    chat = ChatTokenizer(llama3_tokenizer)
    actions = ["\\boxed{25}  ", *ACTIONS[1:]]
    sequence, history = play(chat, "<|eot_id|>", actions=actions)
    assert sequence != full_rendering(chat, history)
    assert "\\boxed{25}  <|eot_id|>" in llama3_tokenizer.decode(sequence)


def test_qwen3_without_reasoning_equals_full_history_rendering(qwen3_tokenizer):
    chat = ChatTokenizer(qwen3_tokenizer)
    sequence, history = play(chat, "<|im_end|>")
    assert sequence == full_rendering(chat, history)


def test_qwen3_keeps_reasoning_the_template_strips_from_earlier_turns(qwen3_tokenizer):
    """Qwen3's template drops <think> blocks of earlier turns; the sequence keeps what was sampled."""
    chat = ChatTokenizer(qwen3_tokenizer)
    actions = [f"<think>\nstep {i}\n</think>\n\n\\boxed{{{n}}}" for i, n in enumerate((25, 37, 31))]
    sequence, history = play(chat, "<|im_end|>", actions=actions)
    ours = qwen3_tokenizer.decode(sequence)
    theirs = qwen3_tokenizer.decode(full_rendering(chat, history))
    for i in range(3):
        assert f"<think>\nstep {i}\n</think>" in ours
        assert f"step {i}" not in theirs
    # Apart from the reasoning, both are the same conversation.
    stripped = ours
    for action in actions:
        stripped = stripped.replace(action, action.split("\n\n", 1)[1])
    assert stripped == theirs


def test_qwen3_enable_thinking_false_delta_ends_with_an_empty_think_block(qwen3_tokenizer):
    chat = ChatTokenizer(qwen3_tokenizer, template_kwargs={"enable_thinking": False})
    delta = chat.observation_ids([{"role": "user", "content": "hi"}], chat.encode("x<|im_end|>"))
    assert qwen3_tokenizer.decode(delta) == (
        "\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


@pytest.mark.parametrize(
    ("fixture", "end_token"),
    [("qwen25_tokenizer", "<|im_end|>"), ("llama3_tokenizer", "<|eot_id|>")],
)
def test_completion_cut_by_length_gets_the_end_of_turn_marker(request, fixture, end_token):
    tokenizer = request.getfixturevalue(fixture)
    chat = ChatTokenizer(tokenizer)
    cut = chat.encode("\\boxed{2")  # no end-of-turn token: the engine hit max_tokens
    delta = tokenizer.decode(chat.observation_ids([{"role": "user", "content": "hi"}], cut))
    assert delta.startswith(end_token)
    finished = chat.encode("\\boxed{2" + end_token)
    delta_finished = tokenizer.decode(
        chat.observation_ids([{"role": "user", "content": "hi"}], finished)
    )
    assert delta == end_token + delta_finished


def test_recorder_masks_and_turn_indices(qwen25_tokenizer):
    chat = ChatTokenizer(qwen25_tokenizer)
    episode = Episode(env_id="x:Y-v0", seed=0, task="")
    recorder = TokenRecorder(chat)
    prompt = list(recorder.start(episode, TASK))
    completion = chat.encode("\\boxed{25}<|im_end|>")
    recorder.add_action(episode, Action("\\boxed{25}", completion, [-0.5] * len(completion)), 0)
    recorder.add_observation(episode, [{"role": "user", "content": "higher"}], completion, 0)
    n_prompt, n_completion = len(prompt), len(completion)
    n_total = len(episode.token_ids)
    assert len(episode.loss_mask) == len(episode.logprobs) == len(episode.turn_index) == n_total
    assert episode.loss_mask == [0] * n_prompt + [1] * n_completion + [0] * (
        n_total - n_prompt - n_completion
    )
    assert episode.turn_index[:n_prompt] == [-1] * n_prompt
    assert set(episode.turn_index[n_prompt:]) == {0}
    assert episode.logprobs[n_prompt : n_prompt + n_completion] == [-0.5] * n_completion
    assert episode.token_ids[n_prompt : n_prompt + n_completion] == completion


def test_recorder_can_train_on_observations(qwen25_tokenizer):
    recorder = TokenRecorder(ChatTokenizer(qwen25_tokenizer), mask_observations=False)
    episode = Episode(env_id="x:Y-v0", seed=0, task="")
    n_prompt = len(recorder.start(episode, TASK))
    completion = recorder.add_action(episode, Action("hi"), 0)  # no ids: encoded from text
    recorder.add_observation(episode, [{"role": "user", "content": "ok"}], completion, 0)
    assert episode.loss_mask[:n_prompt] == [0] * n_prompt
    assert set(episode.loss_mask[n_prompt:]) == {1}
    assert episode.logprobs[n_prompt:] == [0.0] * (len(episode.token_ids) - n_prompt)


def test_tokenizer_without_chat_template_is_rejected(qwen25_tokenizer):
    bare = qwen25_tokenizer.__class__(tokenizer_object=qwen25_tokenizer.backend_tokenizer)
    bare.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        ChatTokenizer(bare)


def test_an_observation_that_continues_the_assistant_message(qwen25_tokenizer):
    """Search-R1's <information>: appended as its text's tokens inside the same assistant
    message (no end of turn, no new message), masked, and the policy continues; the sequence
    is what the template renders for the joined message."""
    tokenizer = qwen25_tokenizer
    chat = ChatTokenizer(tokenizer)
    recorder = TokenRecorder(chat)
    episode = Episode(env_id="x:Y-v0", seed=0, task="")
    prompt = list(recorder.start(episode, TASK))
    action = "<search>25</search>"
    observation = '\n\n<information>Doc 1(Title: "T") too low</information>\n\n'
    completion = recorder.add_action(episode, Action(action, chat.encode(action)), 0)
    new = [{"role": "assistant", "content": observation}]
    sequence = recorder.add_observation(episode, new, completion, 0)
    joined = [*TASK, {"role": "assistant", "content": action + observation}]
    rendered = tokenizer.apply_chat_template(joined, tokenize=False, continue_final_message=True)
    assert sequence == chat.encode(rendered)
    assert episode.token_ids[len(prompt) + len(completion) :] == chat.encode(observation)
    assert episode.loss_mask == [0] * len(prompt) + [1] * len(completion) + [0] * len(
        chat.encode(observation)
    )
    final = recorder.add_action(episode, Action("<answer>37</answer><|im_end|>"), 1)
    joined[-1]["content"] += "<answer>37</answer>"
    full = tokenizer.apply_chat_template(joined, tokenize=False)
    assert (
        episode.token_ids == chat.encode(full.rstrip("\n")) and final[-1] == episode.token_ids[-1]
    )


@pytest.mark.parametrize("end", ["<|im_end|>", "<|endoftext|>"])
def test_a_turn_end_before_a_continuation_leaves_the_sequence(qwen25_tokenizer, end):
    """The engine stopped at its end-of-turn (or EOS) token, the env continued the message:
    that token leaves the sequence, which stays what the template renders for the message."""
    chat = ChatTokenizer(qwen25_tokenizer)
    recorder = TokenRecorder(chat)
    episode = Episode(env_id="x:Y-v0", seed=0, task="")
    recorder.start(episode, TASK)
    ids = chat.encode("<search>25</search>" + end)
    action = Action("<search>25</search>", ids, [-0.1] * len(ids))
    completion = recorder.add_action(episode, action, 0)
    observation = "\n\n<information>too low</information>\n\n"
    new = [{"role": "assistant", "content": observation}]
    sequence = recorder.add_observation(episode, new, completion, 0)
    joined = [*TASK, {"role": "assistant", "content": "<search>25</search>" + observation}]
    rendered = qwen25_tokenizer.apply_chat_template(
        joined, tokenize=False, continue_final_message=True
    )
    assert sequence == chat.encode(rendered)
    assert len(episode.logprobs) == len(episode.loss_mask) == len(episode.turn_index)
    assert len(episode.loss_mask) == len(sequence) and sum(episode.loss_mask) == len(ids) - 1
    plain = TokenRecorder(chat)  # a new message after the same completion keeps the token
    other = Episode(env_id="x:Y-v0", seed=0, task="")
    plain.start(other, TASK)
    plain.add_action(other, Action("<search>25</search>", ids), 0)
    plain.add_observation(other, [{"role": "user", "content": "hi"}], ids, 0)
    assert sum(other.loss_mask) == len(ids)
