"""Question-answering rewards: SQuAD-style normalized exact match and token F1.

:func:`token_f1` is SQuAD's F1, for reporting. As a reward it pays for hedging: its harmonic
mean of precision and recall gives "Paris London" 0.67 against the gold "Paris", while a coin
flip between the two expects 0.5. :func:`hedge_proof_f1`, the F1 reward of :func:`verify` and
the search envs, takes the smaller of precision and recall instead: every extra word costs
its share of the answer, so listing n candidates scores about 1/n, no more than a guess.

>>> exact_match("The Eiffel Tower!", ["eiffel tower", "Tour Eiffel"])
1.0
>>> round(token_f1("the tall Eiffel tower", "Eiffel Tower"), 3)
0.8
>>> round(hedge_proof_f1("the tall Eiffel tower", "Eiffel Tower"), 3)
0.667
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from palaestra.verifiers.extract import extract_answer

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)

QaGold = str | Sequence[str]


def normalize_text(text: str) -> str:
    """Lowercase, drop punctuation and English articles, collapse whitespace (SQuAD rules).

    >>> normalize_text("  The  Answer, is: A cat! ")
    'answer is cat'
    """
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _golds(gold: QaGold) -> list[str]:
    golds = [gold] if isinstance(gold, str) else list(gold)
    if not golds or not all(isinstance(g, str) for g in golds):
        raise ValueError("gold must be a string or a non-empty sequence of strings")
    return golds


def exact_match(prediction: str, gold: QaGold) -> float:
    """1.0 when the normalized prediction equals any normalized gold answer."""
    pred = normalize_text(prediction)
    return float(any(pred == normalize_text(g) for g in _golds(gold)))


def _precision_recall(prediction_tokens: list[str], gold_tokens: list[str]) -> tuple[float, float]:
    if not prediction_tokens or not gold_tokens:
        same = float(prediction_tokens == gold_tokens)
        return same, same
    common = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    return common / len(prediction_tokens), common / len(gold_tokens)


def _f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    precision, recall = _precision_recall(prediction_tokens, gold_tokens)
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, gold: QaGold) -> float:
    """Best token-level F1 between the normalized prediction and any gold answer (SQuAD)."""
    pred_tokens = normalize_text(prediction).split()
    return max(_f1(pred_tokens, normalize_text(g).split()) for g in _golds(gold))


def hedge_proof_f1(prediction: str, gold: QaGold) -> float:
    """Token overlap that does not pay for listing candidates: the smaller of token
    precision and recall against the best gold answer (never above :func:`token_f1`).

    >>> hedge_proof_f1("Paris London", "Paris"), round(token_f1("Paris London", "Paris"), 3)
    (0.5, 0.667)
    >>> hedge_proof_f1("New York", ["NYC", "New York City"])
    0.6666666666666666
    """
    pred_tokens = normalize_text(prediction).split()
    return max(min(_precision_recall(pred_tokens, normalize_text(g).split())) for g in _golds(gold))


def extract_qa_answer(completion: str) -> str:
    r"""The answer part of a completion: the last ``<answer>`` or ``\boxed{}``, else all of it."""
    return extract_answer(completion, ("answer_tag", "boxed")) or completion


def verify(completion: str, gold: QaGold, *, metric: Literal["em", "f1"] = "em") -> float:
    """Grade a QA completion: extract its answer, then exact match (``"em"``) or the F1
    reward (:func:`hedge_proof_f1`).

    >>> verify("<think>...</think><answer>Paris</answer>", ["Paris", "Paris, France"])
    1.0
    """
    if metric not in ("em", "f1"):
        raise ValueError(f"metric must be 'em' or 'f1', got {metric!r}")
    answer = extract_qa_answer(completion)
    return exact_match(answer, gold) if metric == "em" else hedge_proof_f1(answer, gold)
