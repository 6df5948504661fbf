"""Search envs: a question answered with a search tool, rewarded by exact match (or F1).

:class:`SearchQA` serves questions and grades ``<answer>...</answer>``; it owns the corpus
and its retriever. :class:`SearchEnv` adds the ``search`` tool to it (a
:class:`~palaestra.envs.tool_env.ToolEnv`) in a tool-call format (the default ``hermes``)::

    <tool_call>{"name": "search", "arguments": {"query": "who founded the Quillon Institute"}}</tool_call>
    -> (tool message) Doc 1(Title: "The Quillon Institute") The Quillon Institute was ...
    <answer>Varnel Oskuth</answer>

Retrieved text is a tool observation, so the runner keeps it out of the loss by default.
Search-R1's own protocol is :class:`~palaestra.envs.search.search_r1.SearchR1Env`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Literal

from palaestra.core.env import Env, Policy
from palaestra.core.tool_calls import ToolCall
from palaestra.envs.base import AnswerEnv, Grade
from palaestra.envs.tool_env import ToolEnv
from palaestra.tasks import Problem, TaskSource, row_for_reset
from palaestra.tools.search import Doc, Retriever, RetrieverSpec, SearchTool, make_retriever
from palaestra.verifiers.qa import exact_match, extract_qa_answer, hedge_proof_f1, token_f1

SYSTEM_PROMPT = (
    "Answer the question. The facts you need are in a knowledge base that you can search; "
    "search as often as you need, one fact at a time. When you know the answer, give only "
    "the answer inside <answer> and </answer>, for example <answer>Paris</answer>."
)
DEFAULT_MAX_SEARCHES = 8


class SearchQA(AnswerEnv):
    """Questions over a corpus; reward: exact match (``metric="em"``) or the F1 reward that
    does not pay for hedging (``"f1"``, :func:`~palaestra.verifiers.qa.hedge_proof_f1`) of
    the final ``<answer>`` against the gold answers; ``info["metrics"]`` also logs SQuAD F1.

    ``answer_format="tagged"`` reads the answer from the action (its last ``<answer>`` or
    ``\\boxed{}``, else the whole action); ``"plain"``: the action is the answer (a protocol
    wrapper such as :class:`~palaestra.envs.search.search_r1.SearchR1Env` read it already).

    ``questions`` is a task source of :class:`~palaestra.tasks.Problem` whose ``answer`` is
    a tuple of accepted answers and whose ``metadata["evidence_titles"]`` (optional) names
    the gold documents. ``retriever`` is ``"bm25"`` (an index over ``corpus``), the URL of
    a Search-R1-style retrieval server, a ``{"kind": ..., **options}`` mapping or a
    retriever object (see :func:`~palaestra.tools.search.make_retriever`). The search tool
    (:class:`SearchEnv`) returns ``k`` documents per search, at most ``max_searches`` times.
    """

    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        questions: TaskSource,
        corpus: Sequence[Doc] = (),
        *,
        retriever: RetrieverSpec = "bm25",
        k: int = 3,
        max_searches: int = DEFAULT_MAX_SEARCHES,
        metric: Literal["em", "f1"] = "em",
        answer_format: Literal["tagged", "plain"] = "tagged",
        max_attempts: int = 1,
        render_mode: str | None = None,
    ):
        super().__init__(max_attempts=max_attempts, render_mode=render_mode)
        if metric not in ("em", "f1"):
            raise ValueError(f"metric must be 'em' or 'f1', got {metric!r}")
        if answer_format not in ("tagged", "plain"):
            raise ValueError(f"answer_format must be 'tagged' or 'plain', got {answer_format!r}")
        self.questions = questions
        self.corpus = corpus
        self.retriever_spec = retriever
        self.k = k
        self.max_searches = max_searches
        self.metric = metric
        self.answer_format = answer_format

    @functools.cached_property
    def retriever(self) -> Retriever:
        """The retriever the search tool uses (built on first use)."""
        return make_retriever(self.retriever_spec, self.corpus)

    @property
    def problem_count(self) -> int:  # type: ignore[override]
        return len(self.questions)

    @property
    def question(self) -> str:
        """The current question's text, without the prompt around it."""
        return str(self.problem.metadata.get("question", self.problem.prompt))

    def new_problem(self, seed: int | None, options: dict[str, Any]) -> Problem:
        return self.questions[row_for_reset(len(self.questions), seed, options, self.np_random)]

    def grade(self, action: str, problem: Problem) -> Grade:
        answer = action if self.answer_format == "plain" else extract_qa_answer(action)
        em = exact_match(answer, problem.answer)
        f1 = token_f1(answer, problem.answer)
        score = em if self.metric == "em" else hedge_proof_f1(answer, problem.answer)
        solved = em == 1.0
        return Grade(
            score, solved, "Correct." if solved else "That is not correct.", {"em": em, "f1": f1}
        )

    def format_answer(self, answer: str) -> str:
        return f"<answer>{answer}</answer>"

    def oracle(self) -> Policy:
        answers = self.problem.answer
        text = self.format_answer(str(answers[0]))
        return lambda observation: text

    def close(self) -> None:
        if "retriever" in self.__dict__:
            self.retriever.close()
        super().close()


class SearchEnv(ToolEnv):
    """A :class:`SearchQA` with the ``search`` tool (``k`` documents per search, at most
    ``max_searches`` searches per episode, both from the env), called in the tool-call
    ``format``; ``wrap="information"`` wraps results in ``<information>`` tags."""

    def __init__(self, env: Env, *, format: str = "hermes", wrap: str | None = None):
        inner = env.unwrapped
        if not isinstance(inner, SearchQA):
            raise TypeError(f"SearchEnv wraps a SearchQA env, got {type(inner).__name__}")
        tool = SearchTool(inner.retriever, k=inner.k, max_calls=inner.max_searches, wrap=wrap)
        super().__init__(env, [tool], format=format, max_tool_turns=inner.max_searches)
        self.qa = inner

    def oracle(self) -> Policy:
        """Search each gold evidence title (all in one action), then answer."""
        titles = list(self.qa.problem.metadata.get("evidence_titles", ()))[: self.max_tool_turns]
        answer = self.qa.oracle()
        if not titles:
            return answer
        calls = "\n".join(
            self.format.format(ToolCall("search", {"query": title}), self.own_tools)
            for title in titles
        )
        steps = iter([f"I will look up the evidence.\n{calls}"])
        return lambda observation: next(steps, None) or answer(observation)
