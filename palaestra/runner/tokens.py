"""Token-level conversation building: one growing token sequence per episode (``docs/runner.md``).

Nothing is re-tokenized from text. The prompt is rendered once with the chat template; each
completion is appended as the token ids and logprobs the engine returned; each observation
is appended as the *chat-template delta* of the new message: the text the template puts
after an assistant message's content (the end-of-turn marker the engine did not emit), the
new message, and the generation prompt.

The delta is read off a rendering of ``[user, assistant(SENTINEL), new message]``: whatever
follows the sentinel is, by construction, what the template writes after an assistant turn.
That is independent of the real history, so templates that rewrite earlier turns (Qwen3
drops the ``<think>`` block of every assistant turn before the last user message) cannot
break it, and the cost per turn does not grow with the history.

An observation that continues the assistant's message (``info["role"] == "assistant"``,
Search-R1's ``<information>`` blocks) is appended as the tokens of its text alone: no
end-of-turn marker, no new message, no generation prompt, since the policy goes on writing
the same message. If the completion ended its turn (its last token is the template's
end-of-turn token or EOS), that one token leaves the sequence: the message did not end after
all. The sequence is then what the template renders for the joined message, and what
Search-R1 builds (its observation string tokenized on its own, after a response cut at
``</search>``).

Where the sequence differs from ``apply_chat_template(full_history)``, by design:

* earlier assistant turns keep exactly what the policy generated (Qwen3's template would strip
  their reasoning and add an empty ``<think></think>`` to the last one);
* completions keep the engine's token ids even where re-tokenizing their text would give
  other ids, and keep whitespace a template would trim (Llama 3 trims message content);
* a completion cut by the length limit is followed by the template's full end-of-turn text.
"""

from __future__ import annotations

from typing import Any

from palaestra.agents.base import Action
from palaestra.core.messages import continues_message
from palaestra.core.types import Episode, Message

_SENTINEL = "PALAESTRA_ASSISTANT_SENTINEL"


class ChatTokenizer:
    """Renders messages to token ids with a Hugging Face tokenizer's chat template.

    ``template_kwargs`` go to ``apply_chat_template`` (e.g. ``{"enable_thinking": False}``).

    >>> chat = ChatTokenizer(tokenizer)  # doctest: +SKIP
    >>> ids = chat.prompt_ids([{"role": "user", "content": "Hi"}])  # doctest: +SKIP
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        tools: list[dict[str, Any]] | None = None,
        template_kwargs: dict[str, Any] | None = None,
    ):
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError(
                f"{type(tokenizer).__name__} has no chat template; set tokenizer.chat_template "
                "to the model's Jinja template"
            )
        self.tokenizer = tokenizer
        self.tools = tools or None
        self.template_kwargs = dict(template_kwargs or {})
        self.assistant_suffix = self._text_after_assistant([], add_generation_prompt=False)
        if not self.assistant_suffix:
            raise ValueError("the chat template writes nothing after an assistant message")

    def render(self, messages: list[Message], *, add_generation_prompt: bool) -> str:
        """The template's text for ``messages``."""
        return self.tokenizer.apply_chat_template(
            messages,
            tools=self.tools,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
            **self.template_kwargs,
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered text (special-token strings map to their ids, no BOS added)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(self, messages: list[Message]) -> list[int]:
        """The first prompt: ``messages`` rendered with the generation prompt."""
        return self.encode(self.render(messages, add_generation_prompt=True))

    def observation_ids(self, messages: list[Message], completion_ids: list[int]) -> list[int]:
        """Tokens to append after a completion so that ``messages`` (an observation, or one
        tool result per call) follow it.

        Includes the end-of-turn text the completion lacks (none when its last token is the
        template's end-of-turn token, e.g. ``<|im_end|>``) and the next generation prompt.
        An observation that continues the assistant's message is its text's tokens alone.
        """
        if continues_message(messages):
            return self.encode("".join(str(m["content"]) for m in messages))
        delta = self._text_after_assistant(messages, add_generation_prompt=True)
        emitted = self._emitted_suffix(completion_ids)
        return self.encode(delta[len(emitted) :])

    def ends_turn(self, completion_ids: list[int]) -> bool:
        """Whether the completion's last token ends the turn: EOS, or the special token the
        template writes after an assistant message (``<|im_end|>``, ``<|eot_id|>``)."""
        if not completion_ids:
            return False
        last = completion_ids[-1:]
        if last[0] == self.tokenizer.eos_token_id:
            return True
        special = self.tokenizer.decode(last, skip_special_tokens=True) == ""
        return special and bool(self._emitted_suffix(last))

    def _emitted_suffix(self, completion_ids: list[int]) -> str:
        if not completion_ids:
            return ""
        last = self.tokenizer.decode(completion_ids[-1:], skip_special_tokens=False)
        return last if last and self.assistant_suffix.startswith(last) else ""

    def _text_after_assistant(self, new: list[Message], *, add_generation_prompt: bool) -> str:
        base: list[Message] = [
            {"role": "user", "content": "?"},
            {"role": "assistant", "content": _SENTINEL},
        ]
        text = self.render(base + new, add_generation_prompt=add_generation_prompt)
        _, found, tail = text.rpartition(_SENTINEL)
        if not found:
            raise ValueError("the chat template dropped the assistant message's content")
        return tail


class TokenRecorder:
    """Fills an :class:`Episode`'s token-level fields as the episode runs.

    ``mask_observations=False`` puts observation and tool-result tokens in the loss too
    (loss_mask 1; R1-Code-Interpreter's ablation).
    """

    def __init__(self, chat: ChatTokenizer, *, mask_observations: bool = True):
        self.chat = chat
        self.observation_mask = 0 if mask_observations else 1

    def start(self, episode: Episode, messages: list[Message]) -> list[int]:
        """Record the prompt; returns the token ids the policy continues."""
        ids = self.chat.prompt_ids(messages)
        self._append(episode, ids, [0.0] * len(ids), 0, -1)
        return episode.token_ids

    def add_action(self, episode: Episode, action: Action, turn: int) -> list[int]:
        """Record a completion; returns its token ids (encoded from text if the engine gave none)."""
        ids = action.token_ids or self.chat.encode(action.text)
        logprobs = action.logprobs if len(action.logprobs) == len(ids) else [0.0] * len(ids)
        self._append(episode, ids, logprobs, 1, turn)
        return ids

    def fit(self, action: Action, max_tokens: int) -> Action:
        """``action`` cut to its first ``max_tokens`` tokens (the text decoded from them,
        finish reason ``"length"``), as an engine asked for at most ``max_tokens`` would have
        sampled it; unchanged when it fits."""
        ids = action.token_ids or self.chat.encode(action.text)
        if len(ids) <= max_tokens:
            return action
        kept = ids[:max_tokens]
        text = self.chat.tokenizer.decode(kept, skip_special_tokens=True)
        return Action(text, kept, action.logprobs[:max_tokens], "length")

    def add_observation(
        self,
        episode: Episode,
        messages: list[Message],
        completion_ids: list[int],
        turn: int,
        *,
        limit: int | None = None,
    ) -> list[int] | None:
        """Record an observation (its messages) as the template delta; returns the whole
        sequence, or None (recording nothing) when the sequence would then leave no room
        under ``limit`` tokens for another completion. Before an observation that continues
        the assistant's message, a last token of the completion that ended the turn is taken
        out of the sequence."""
        reopen = continues_message(messages) and self.chat.ends_turn(completion_ids)
        ids = self.chat.observation_ids(messages, completion_ids)
        if limit is not None and len(episode.token_ids) - reopen + len(ids) >= limit:
            return None
        if reopen:
            for values in (
                episode.token_ids,
                episode.logprobs,
                episode.loss_mask,
                episode.turn_index,
            ):
                values.pop()
        self._append(episode, ids, [0.0] * len(ids), self.observation_mask, turn)
        return episode.token_ids

    @staticmethod
    def _append(
        episode: Episode, ids: list[int], logprobs: list[float], mask: int, turn: int
    ) -> None:
        episode.token_ids.extend(ids)
        episode.logprobs.extend(logprobs)
        episode.loss_mask.extend([mask] * len(ids))
        episode.turn_index.extend([turn] * len(ids))
