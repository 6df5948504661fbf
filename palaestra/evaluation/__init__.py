"""Evaluation: run an agent on envs, summarize per env (with pass@k), write JSONL and HTML."""

from palaestra.evaluation.metrics import EnvSummary, pass_at_k, summarize
from palaestra.evaluation.report import read_jsonl, write_html, write_jsonl
from palaestra.evaluation.run import (
    EvalConfig,
    EvalResult,
    aevaluate,
    evaluate,
    resolve_env_ids,
    write_outputs,
)

__all__ = [
    "EnvSummary",
    "EvalConfig",
    "EvalResult",
    "aevaluate",
    "evaluate",
    "pass_at_k",
    "read_jsonl",
    "resolve_env_ids",
    "summarize",
    "write_html",
    "write_jsonl",
    "write_outputs",
]
