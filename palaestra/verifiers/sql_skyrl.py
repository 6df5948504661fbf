"""SkyRL-SQL's reward rules, reimplemented: the answer format, then a set comparison.

SkyRL-SQL (NovaSky-AI/SkyRL, ``skyrl_gym/envs/sql``) scores the whole episode's text, the
policy's turns and the ``<observation>`` blocks it was shown, joined:

* **-1** when the format is broken: not exactly one ``<solution>`` with exactly one
  ``</solution>`` after it; a ``<think>``, ``<sql>`` or ``<observation>`` tag inside the
  solution; no ``<think>...</think>`` anywhere; or an ``</observation>`` before the
  solution that is not followed by ``<think>`` (every turn after a tool result thinks first);
* **0** when the solution's query fails, does not parse, runs out of time, or its result
  differs from the gold's;
* **1** when the two results are equal as sets of rows
  (:func:`~palaestra.verifiers.sql_compare.results_equal_as_sets`: duplicates and row order
  ignored, values exact, columns in place).

>>> skyrl_solution("<think>count them</think><solution>SELECT COUNT(*) FROM t</solution>")
'SELECT COUNT(*) FROM t'
>>> skyrl_solution("<solution>SELECT 1</solution>") is None  # no <think>
True
"""

from __future__ import annotations

import re

SKYRL_FORMAT_PENALTY = -1.0
_TAG_IN_SOLUTION = re.compile(r"</?(think|sql|observation)\b", re.IGNORECASE)
_THOUGHT = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_OBSERVATION_END = re.compile(r"</observation>", re.IGNORECASE)


def skyrl_solution(transcript: str) -> str | None:
    """The query of a transcript that follows SkyRL-SQL's format (stripped), or None when
    the format is broken (the rules in the module docstring)."""
    if transcript.count("<solution>") != 1:
        return None
    before, after = transcript.split("<solution>", 1)
    if after.count("</solution>") != 1:
        return None
    solution = after.split("</solution>", 1)[0]
    if _TAG_IN_SOLUTION.search(solution) or not _THOUGHT.search(transcript):
        return None
    for end in _OBSERVATION_END.finditer(before):
        if not before[end.end() :].lstrip().lower().startswith("<think>"):
            return None
    return solution.strip()


def skyrl_observation(text: str) -> str:
    """A tool result the way SkyRL-SQL shows it to the policy."""
    return f"\n\n<observation>{text}</observation>\n\n"
