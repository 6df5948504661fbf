"""Search-R1's protocol, as Search-R1's rollout loop runs it (Jin et al. 2025;
PeterGriffinJin/Search-R1, ``search_r1/llm_agent/generation.py``).

The task is Search-R1's prompt (no system prompt, no tool schemas). Each turn the env reads
the policy's text the way Search-R1 does: the text is cut after its first ``</search>`` (or,
without one, after its first ``</answer>``), then the first ``<search>q</search>`` or
``<answer>a</answer>`` in what remains decides the turn (tags are case-sensitive):

* search: the documents come back inside the assistant's own message, as Search-R1 appends
  them, ``\\n\\n<information>Doc 1(Title: "T") text\\nDoc 2(...) ...</information>\\n\\n``
  (``info["role"] == "assistant"``: the runner appends their tokens to the same message and
  masks them from the loss); one search per turn;
* answer: ``a`` is graded against the gold answers (exact match, or ``metric="f1"``) and the
  episode ends;
* anything else (a bare answer, ``\\boxed{}``, ``<think>`` alone, ``<SEARCH>``, an empty
  turn): Search-R1's invalid-action message, appended the same way; no grade, and the
  episode goes on.

Every turn counts toward ``max_turns`` (the env's ``max_searches`` plus the answer). As in
Search-R1's last rollout, a search on the last turn is not run and the episode ends with
reward 0. Text the policy writes after the tag that decided its turn stays in its message
(it is the policy's own output) but is not read; engines that stop at ``</search>`` and
``</answer>`` (keeping the stop string) give exactly Search-R1's rollouts.

>>> read_action("<think>x</think><answer> Paris </answer><search>q</search>")
SearchR1Action(kind='answer', content='Paris')
>>> read_action("glassmaker")
SearchR1Action(kind=None, content='')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from palaestra.core.env import Env, Policy, ResetResult, StepResult
from palaestra.core.messages import CONTINUE_ROLE
from palaestra.core.wrappers import Wrapper, truncate_at_limit
from palaestra.envs.base import EPISODE_OVER
from palaestra.envs.search.env import SearchQA
from palaestra.tools.search.base import Doc, passages_text
from palaestra.tools.search.tool import MAX_OUTPUT_CHARS

PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first "
    "every time you get new information. After reasoning, if you find you lack some knowledge, "
    "you can call a search engine by <search> query </search> and it will return the top "
    "searched results between <information> and </information>. You can search as many times "
    "as your want. If you find no further external knowledge needed, you can directly provide "
    "the answer inside <answer> and </answer>, without detailed illustrations. For example, "
    "<answer> Beijing </answer>. Question: {question}\n"
)
"""Search-R1's prompt template (``make_prefix`` of its ``scripts/data_process/nq_search.py``),
word for word: models trained with Search-R1 expect it."""

INVALID_ACTION = (
    "\nMy previous action is invalid. If I want to search, I should put the query between "
    "<search> and </search>. If I want to give the final answer, I should put the answer "
    "between <answer> and </answer>. Let me try again.\n"
)
"""What Search-R1 appends after a turn that neither searches nor answers."""

_TAGS = ("search", "answer")


@dataclass(frozen=True)
class SearchR1Action:
    """What one turn does: ``"search"``, ``"answer"`` or None (invalid), and the tag's
    content (stripped)."""

    kind: Literal["search", "answer"] | None
    content: str


def cut_turn(text: str) -> str:
    """The part of ``text`` Search-R1 reads: up to its first ``</search>``, else up to its
    first ``</answer>``, else all of it."""
    for tag in ("</search>", "</answer>"):
        end = text.find(tag)
        if end >= 0:
            return text[: end + len(tag)]
    return text


def read_action(text: str) -> SearchR1Action:
    """The action of one turn, read as Search-R1 reads it (see the module docstring).

    The first complete ``<search>...</search>`` or ``<answer>...</answer>`` of the cut text
    wins; its content ends at the first matching close tag. Linear time: only the first
    opening of each tag can start the first complete pair.
    """
    text = cut_turn(text)
    found: tuple[int, SearchR1Action] | None = None
    for tag in _TAGS:
        start = text.find(f"<{tag}>")
        if start < 0:
            continue
        end = text.find(f"</{tag}>", start + len(tag) + 2)
        if end >= 0 and (found is None or start < found[0]):
            content = text[start + len(tag) + 2 : end].strip()
            found = (start, SearchR1Action(tag, content))  # type: ignore[arg-type]
    return found[1] if found else SearchR1Action(None, "")


def information(docs: Sequence[Doc], max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """Retrieved documents as Search-R1 appends them after a search."""
    text = passages_text(docs).strip()
    if len(text) > max_chars:
        text = text[:max_chars] + " (truncated)"
    return f"\n\n<information>{text}</information>\n\n"


def search_r1_prompt(question: str) -> str:
    """Search-R1's prompt for ``question`` (stripped, with a question mark added if it has
    none, as Search-R1's data scripts do)."""
    question = question.strip()
    if not question.endswith("?"):
        question += "?"
    return PROMPT.format(question=question)


class SearchR1Env(Wrapper):
    """A :class:`~palaestra.envs.search.env.SearchQA` played in Search-R1's protocol (module
    docstring). The wrapped env grades the content of the ``<answer>`` tag as it is
    (its ``answer_format`` is set to ``"plain"``)."""

    def __init__(self, env: Env):
        super().__init__(env)
        qa = env.unwrapped
        if not isinstance(qa, SearchQA):
            raise TypeError(f"SearchR1Env wraps a SearchQA env, got {type(qa).__name__}")
        qa.answer_format = "plain"
        self.qa = qa
        self.turn_limit = (env.max_turns or 1) + qa.max_searches
        self.turns = self.searches = self.invalid_actions = 0
        self.over = True
        low, high = env.reward_range
        self._step_reward = min(max(0.0, low), high)

    @property
    def system_prompt(self) -> None:  # type: ignore[override]
        return None

    @property
    def tools(self) -> list[dict[str, Any]]:
        return []

    @property
    def tool_format(self) -> str:  # type: ignore[override]
        return "tags"

    @property
    def max_turns(self) -> int:  # type: ignore[override]
        return self.turn_limit

    def after_reset(self, result: ResetResult, seed: int | None) -> ResetResult:
        self.turns = self.searches = self.invalid_actions = 0
        self.over = False
        return search_r1_prompt(self.qa.question), result[1]

    def step(self, action: str) -> StepResult:
        if self.over:
            return EPISODE_OVER, 0.0, True, False, {"role": "user"}
        read = self._begin(action)
        if read.kind == "answer":
            return self._end(self.env.step(read.content))
        found: list[Doc] | Exception | None = None
        if self._searches(read):
            try:
                found = self.qa.retriever.search(read.content, self.qa.k)
            except Exception as error:  # the retriever failed: the policy sees it
                found = error
        return self._continue(read, found)

    async def astep(self, action: str) -> StepResult:
        if self.over:
            return EPISODE_OVER, 0.0, True, False, {"role": "user"}
        read = self._begin(action)
        if read.kind == "answer":
            return self._end(await self.env.astep(read.content))
        found: list[Doc] | Exception | None = None
        if self._searches(read):
            try:
                found = await self.qa.retriever.asearch(read.content, self.qa.k)
            except Exception as error:
                found = error
        return self._continue(read, found)

    def _begin(self, action: str) -> SearchR1Action:
        self.turns += 1
        return read_action(action)

    def _searches(self, read: SearchR1Action) -> bool:
        """Whether this turn runs its search (not on the last turn, as in Search-R1)."""
        return read.kind == "search" and self.turns < self.turn_limit

    def _continue(self, read: SearchR1Action, found: list[Doc] | Exception | None) -> StepResult:
        """A turn that searched (or tried to) or was invalid: the episode goes on."""
        if read.kind is None:
            self.invalid_actions += 1
            observation = INVALID_ACTION
        elif found is None:  # a search on the last turn is not run
            observation = ""
        else:
            self.searches += 1
            observation = (
                information(found)
                if not isinstance(found, Exception)
                else f"\n\n<information>error: search failed: {type(found).__name__}: "
                f"{found}</information>\n\n"
            )
        info = {"role": CONTINUE_ROLE, "metrics": self._metrics()}
        return self._end((observation, self._step_reward, False, False, info))

    def _end(self, result: StepResult) -> StepResult:
        observation, reward, terminated, truncated, info = truncate_at_limit(
            result, self.turns, self.turn_limit
        )
        if terminated or truncated:
            self.over = True
            info = {**info, "metrics": {**info.get("metrics", {}), **self._metrics()}}
        return observation, reward, terminated, truncated, info

    def _metrics(self) -> dict[str, float]:
        return {"searches": float(self.searches), "invalid_actions": float(self.invalid_actions)}

    def oracle(self) -> Policy:
        """Search each gold evidence title (one per turn), then answer."""
        problem = self.qa.problem
        titles = list(problem.metadata.get("evidence_titles", ()))[: self.turn_limit - 1]
        steps = iter([f"<search>{title}</search>" for title in titles])
        answer = f"<answer>{problem.answer[0]}</answer>"
        return lambda observation: next(steps, None) or answer
