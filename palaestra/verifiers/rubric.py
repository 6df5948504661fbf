"""Weighted composition of reward functions, per turn or per episode, sync or async.

Each component is a reward function called with the completion (``scope="turn"``) or the
list of the episode's completions (``scope="episode"``) plus the keyword context it
accepts (e.g. ``gold``), so any verifier plugs in unchanged. Every component's raw value is
kept for logging next to the weighted total.

>>> from palaestra.verifiers import format, math
>>> rubric = Rubric([
...     RewardComponent("correct", math.verify, weight=1.0),
...     RewardComponent("format", format.tag_fraction, weight=0.1),
... ])
>>> rubric.score("<think>2+2</think><answer>4</answer>", gold="4").total
1.1
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

RewardFn = Callable[..., float | Awaitable[float]]
Scope = Literal["turn", "episode"]
TurnReduce = Literal["mean", "sum", "last"]


@dataclass(frozen=True)
class RewardComponent:
    """One weighted reward function of a :class:`Rubric`."""

    name: str
    fn: RewardFn
    weight: float = 1.0
    scope: Scope = "turn"

    def __post_init__(self) -> None:
        if self.scope not in ("turn", "episode"):
            raise ValueError(f"scope must be 'turn' or 'episode', got {self.scope!r}")
        if not callable(self.fn):
            raise TypeError(f"component {self.name!r}: fn must be callable")


@dataclass(frozen=True)
class RubricScore:
    """The weighted total and each component's raw (unweighted) value."""

    total: float
    components: dict[str, float] = field(default_factory=dict)

    def metrics(self, prefix: str = "reward/") -> dict[str, float]:
        """Flat floats for a logger: the total and one entry per component."""
        return {f"{prefix}total": self.total, **{prefix + k: v for k, v in self.components.items()}}


def accepted_kwargs(fn: Callable[..., Any], context: Mapping[str, Any]) -> dict[str, Any]:
    """The part of ``context`` that ``fn`` accepts by keyword (all of it with ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return dict(context)
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return dict(context)
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {k: v for k, v in context.items() if k in names}


class Rubric:
    """A weighted sum of reward components.

    ``score(completion, **context)`` runs the turn components on one completion;
    ``score_episode(completions, **context)`` runs turn components on every turn (reduced
    by ``turn_reduce``: mean, sum or last) and episode components on the whole list. The
    ``a``-prefixed twins await async components and run sync ones in worker threads,
    concurrently.
    """

    def __init__(self, components: Sequence[RewardComponent], *, turn_reduce: TurnReduce = "mean"):
        if not components:
            raise ValueError("a Rubric needs at least one RewardComponent")
        names = [c.name for c in components]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"component names must be unique; repeated: {duplicates}")
        if turn_reduce not in ("mean", "sum", "last"):
            raise ValueError(f"turn_reduce must be 'mean', 'sum' or 'last', got {turn_reduce!r}")
        self.components = tuple(components)
        self.turn_reduce = turn_reduce
        self.__name__ = "rubric"

    def _of_scope(self, scope: Scope) -> list[RewardComponent]:
        return [c for c in self.components if c.scope == scope]

    def _total(self, values: Mapping[str, float]) -> RubricScore:
        weights = {c.name: c.weight for c in self.components}
        total = sum(weights[name] * value for name, value in values.items())
        return RubricScore(total=total, components=dict(values))

    def _reduce(self, per_turn: Sequence[float]) -> float:
        if not per_turn:
            return 0.0
        if self.turn_reduce == "sum":
            return float(sum(per_turn))
        if self.turn_reduce == "last":
            return float(per_turn[-1])
        return float(sum(per_turn) / len(per_turn))

    # --- sync ---------------------------------------------------------------------------

    @staticmethod
    def _call(component: RewardComponent, subject: Any, context: Mapping[str, Any]) -> float:
        value = component.fn(subject, **accepted_kwargs(component.fn, context))
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            raise TypeError(
                f"component {component.name!r} is async; use Rubric.ascore/ascore_episode"
            )
        return float(value)

    def score(self, completion: str, **context: Any) -> RubricScore:
        """Score one turn with the turn components."""
        turn = self._of_scope("turn")
        if not turn:
            raise ValueError("this Rubric has no turn components; use score_episode")
        return self._total({c.name: self._call(c, completion, context) for c in turn})

    def score_episode(self, completions: Sequence[str], **context: Any) -> RubricScore:
        """Score a whole episode: reduced turn components plus episode components."""
        completions = list(completions)
        values = {
            c.name: self._reduce([self._call(c, text, context) for text in completions])
            for c in self._of_scope("turn")
        }
        for c in self._of_scope("episode"):
            values[c.name] = self._call(c, completions, context)
        return self._total(values)

    def __call__(self, completion: str, **context: Any) -> float:
        return self.score(completion, **context).total

    # --- async --------------------------------------------------------------------------

    @staticmethod
    async def _acall(component: RewardComponent, subject: Any, context: Mapping[str, Any]) -> float:
        kwargs = accepted_kwargs(component.fn, context)
        if inspect.iscoroutinefunction(component.fn):
            return float(await component.fn(subject, **kwargs))
        value = await asyncio.to_thread(component.fn, subject, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        return float(value)

    async def ascore(self, completion: str, **context: Any) -> RubricScore:
        """Async :meth:`score`; the components run concurrently."""
        turn = self._of_scope("turn")
        if not turn:
            raise ValueError("this Rubric has no turn components; use ascore_episode")
        results = await asyncio.gather(*(self._acall(c, completion, context) for c in turn))
        return self._total(dict(zip([c.name for c in turn], results, strict=True)))

    async def ascore_episode(self, completions: Sequence[str], **context: Any) -> RubricScore:
        """Async :meth:`score_episode`; every (component, turn) call runs concurrently."""
        completions = list(completions)
        turn, episode = self._of_scope("turn"), self._of_scope("episode")
        per_turn = await asyncio.gather(
            *(
                asyncio.gather(*(self._acall(c, text, context) for text in completions))
                for c in turn
            )
        )
        whole = await asyncio.gather(*(self._acall(c, completions, context) for c in episode))
        values = {c.name: self._reduce(v) for c, v in zip(turn, per_turn, strict=True)}
        values.update({c.name: v for c, v in zip(episode, whole, strict=True)})
        return self._total(values)
