"""Text-to-SQL envs: answer a question with one SQLite query, graded by execution.

* :class:`SQLEnv` (``sql:Shop-v0`` ...): the schema and a question; the answer is one query,
  written in a ``<solution>`` tag or a fenced ```` ```sql ```` block (the last one counts).
* :class:`SQLToolEnv` (the ``-Tools`` and ``-SQLTag`` variants): the same task with tools to
  explore the database first: ``list_tables``, ``describe_table`` and ``sql`` (run a query,
  rows truncated to a cap); the final answer is submitted as above, without a tool call.

Rewards (``reward=``):

* ``"execution"`` (default): 1 when the answer's result matches the gold query's
  (:func:`palaestra.verifiers.sql.execution_match`), else 0;
* ``"skyrl"``: SkyRL-SQL's scheme, +1 correct, 0 wrong, -1 when no query could be read from
  the answer or it does not parse (a malformed answer costs more than a wrong one).

Every query runs on a read-only connection with a time limit and a row cap, so nothing an
agent runs changes what any episode sees.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from palaestra.core.env import Policy
from palaestra.core.tool_calls import ToolCall
from palaestra.envs.base import AnswerEnv, Grade
from palaestra.envs.sql.databases import DOMAINS, database_path
from palaestra.envs.sql.questions import LEVELS, generate_question
from palaestra.envs.tool_env import ToolEnv
from palaestra.tasks import Problem
from palaestra.tools import FunctionTool, ToolError
from palaestra.verifiers.extract import last_tagged
from palaestra.verifiers.sql import (
    BACKENDS,
    DEFAULT_MAX_ROWS,
    QueryResult,
    SQLError,
    SQLiteDatabase,
    open_database,
    orders_rows,
    results_match,
    transpile_gold,
)

REWARDS = ("execution", "skyrl")
PRESETS = {"easy": (1, 2), "medium": (1, 2, 3, 4, 5), "hard": (4, 5)}
_FENCED_SQL = re.compile(r"```sql[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)

SYSTEM_PROMPT = (
    "You answer questions about a SQLite database by writing one SQL query. Think step by "
    "step, then give the final query inside <solution>...</solution> (or a ```sql code "
    "block); only the last one counts. Return exactly the columns the question asks for."
)


def extract_sql(text: str) -> str | None:
    """The final query of an answer: the last ``<solution>`` tag, else the last fenced
    ```` ```sql ```` block, else the whole text when it is a bare SELECT/WITH query."""
    tagged = last_tagged(text, "solution")
    if tagged is not None:
        return tagged.strip() or None
    blocks = _FENCED_SQL.findall(text)
    if blocks:
        return blocks[-1].strip() or None
    bare = text.strip().rstrip(";")
    return bare if re.match(r"(?is)^(select|with)\b", bare) else None


class SQLEnv(AnswerEnv):
    """A question about a database; the answer is one SQLite query (see module docstring).

    Subclasses serve problems whose ``data["db_path"]`` names the database and whose
    ``answer`` is the gold query: :class:`SyntheticSQL` and :class:`SQLDataset`.
    """

    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        *,
        backend: str = "sqlite",
        reward: str = "execution",
        timeout: float = 5.0,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_attempts: int = 1,
        render_mode: str | None = None,
    ):
        super().__init__(max_attempts=max_attempts, render_mode=render_mode)
        if reward not in REWARDS:
            raise ValueError(f"unknown reward {reward!r}; choose one of {REWARDS}")
        self.reward = reward
        self.reward_range = (-1.0, 1.0) if reward == "skyrl" else (0.0, 1.0)
        self.timeout = timeout
        self.max_rows = max_rows
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
        self.backend = backend
        self._databases: dict[Path, Any] = {}

    # -- the database of the current problem ------------------------------------------------

    @property
    def db_path(self) -> Path:
        return Path(self.problem.data["db_path"])

    def database(self, path: Path | None = None) -> Any:
        """The read-only database at ``path`` (default: this problem's), on this env's
        backend (:func:`palaestra.verifiers.sql.open_database`)."""
        path = path or self.db_path
        if path not in self._databases:
            self._databases[path] = open_database(path, self.backend)
        return self._databases[path]

    def query(self, sql: str, max_rows: int | None = None) -> QueryResult:
        """Run ``sql`` on this problem's database (read-only, time limit, row cap)."""
        return self.database().query(sql, timeout=self.timeout, max_rows=max_rows or self.max_rows)

    # -- grading ----------------------------------------------------------------------------

    @staticmethod
    def prompt(schema: str, question: str, evidence: str | None = None) -> str:
        hint = f"\nHint: {evidence}" if evidence else ""
        return f"Database schema:\n{schema}\n\nQuestion: {question}{hint}"

    def grade(self, action: str, problem: Problem) -> Grade:
        malformed = -1.0 if self.reward == "skyrl" else 0.0
        sql = extract_sql(action)
        if sql is None:
            feedback = "No query found: give it in <solution>...</solution>."
            return Grade(malformed, False, feedback, {"malformed": 1.0})
        gold_sql = transpile_gold(problem.answer, self.database().dialect)
        gold = self.query(gold_sql)  # a failing gold query is a broken task: raise
        try:
            result = self.query(sql)
        except SQLError as error:
            if error.syntax:
                return Grade(
                    malformed, False, f"The query does not parse: {error}", {"malformed": 1.0}
                )
            return Grade(0.0, False, f"The query failed: {error}", {"execution_error": 1.0})
        if not result.truncated and results_match(
            result.rows, gold.rows, ordered=orders_rows(problem.answer)
        ):
            return Grade(1.0, True, "Correct.")
        shown = f"{len(result.rows)}{'+' if result.truncated else ''} rows"
        return Grade(0.0, False, f"The query ran but returned the wrong result ({shown}).")

    def format_answer(self, answer: str) -> str:
        return f"<solution>{answer}</solution>"

    def render_text(self) -> str:
        if self._problem is None:
            return "(not reset)"
        return f"{self.db_path.name}: {self._problem.prompt.rsplit('Question: ', 1)[-1]}"

    def close(self) -> None:
        for database in self._databases.values():
            database.close()
        self._databases.clear()
        super().close()


class SyntheticSQL(SQLEnv):
    """Generated questions over a generated database (``palaestra.envs.sql.databases``).

    ``domain`` is one of :data:`~palaestra.envs.sql.databases.DOMAINS` (``"mixed"``: any of
    them per episode); ``difficulty`` picks the question levels (easy: filters and joins;
    medium: all five; hard: nested queries, window functions and CTEs); ``db_seed`` selects
    the generated database.
    """

    def __init__(
        self, domain: str = "shop", difficulty: str = "medium", *, db_seed: int = 0, **kwargs: Any
    ):
        super().__init__(**kwargs)
        if domain != "mixed" and domain not in DOMAINS:
            raise ValueError(f"unknown domain {domain!r}; choose one of {[*DOMAINS, 'mixed']}")
        if difficulty not in PRESETS:
            raise ValueError(f"unknown difficulty {difficulty!r}; choose one of {sorted(PRESETS)}")
        self.domains = sorted(DOMAINS) if domain == "mixed" else [domain]
        self.levels = PRESETS[difficulty]
        self.db_seed = db_seed
        self._sources: dict[Path, SQLiteDatabase] = {}

    def new_problem(self, seed: int | None, options: dict[str, Any]) -> Problem:
        domain = self.domains[int(self.np_random.integers(len(self.domains)))]
        path = database_path(domain, self.db_seed)
        if path not in self._sources:  # questions draw their values with SQLite, any backend
            self._sources[path] = SQLiteDatabase(path)
        source = self._sources[path].connection
        question = generate_question(domain, source, self.np_random, levels=self.levels)
        data = {
            "db_path": str(path),
            "domain": domain,
            "level": question.level,
            "intent": question.intent,
        }
        schema = self.database(path).schema()
        return Problem(self.prompt(schema, question.text), question.gold_sql, data=data)

    def close(self) -> None:
        for source in self._sources.values():
            source.close()
        self._sources.clear()
        super().close()

    def render_text(self) -> str:
        if self._problem is None:
            return "(not reset)"
        data = self._problem.data
        question = self._problem.prompt.rsplit("Question: ", 1)[-1]
        return f"{data['domain']}, level {data['level']} ({LEVELS[data['level']]}): {question}"


class SQLExplorer:
    """The exploration tools of an SQL env's episode; they read its current database."""

    def __init__(self, env: SQLEnv, max_rows: int = 20) -> None:
        self.env = env
        self.max_rows = max_rows

    def list_tables(self) -> str:
        """List the tables of the database."""
        return "\n".join(self.env.database().tables())

    def describe_table(self, table: str) -> str:
        """Show a table's columns (name, type, nullability, key) and its foreign keys.

        Args:
            table: the table's name, as list_tables gives it
        """
        tables = self.env.database().tables()
        if table not in tables:
            raise ToolError(f"no table {table!r}; tables: {', '.join(tables)}")
        return self.env.database().describe(table)

    def sql(self, query: str) -> str:
        """Run a read-only SQLite query and see its first rows.

        Args:
            query: one SELECT (or WITH) statement
        """
        try:
            result = self.env.query(query, max_rows=self.max_rows)
        except SQLError as error:
            raise ToolError(str(error)) from None
        return format_rows(result.columns, result.rows, result.truncated, self.max_rows)


def format_rows(
    columns: Sequence[str], rows: Sequence[tuple[Any, ...]], truncated: bool, cap: int
) -> str:
    """A result as a small pipe-separated table, with a note when rows were cut."""
    lines = [" | ".join(columns)] + [
        " | ".join("NULL" if v is None else str(v) for v in row) for row in rows
    ]
    if truncated:
        lines.append(f"(only the first {cap} rows are shown)")
    elif not rows:
        lines.append("(no rows)")
    return "\n".join(lines)


class SQLToolEnv(ToolEnv):
    """An :class:`SQLEnv` with exploration tools (see module docstring). ``format="tags"``
    gives SkyRL-SQL's shape: ``<sql>query</sql>`` explores, ``<solution>`` answers."""

    def __init__(
        self,
        env: SQLEnv,
        *,
        format: str = "hermes",
        explore_rows: int = 20,
        max_tool_turns: int = 8,
    ):
        inner = env.unwrapped
        if not isinstance(inner, SQLEnv):
            raise TypeError(f"SQLToolEnv wraps an SQL env, got {type(inner).__name__}")
        explorer = SQLExplorer(inner, explore_rows)
        tools = [FunctionTool(explorer.sql, name="sql")]
        if format != "tags":  # tag formats call tools with one string argument
            tools = [
                FunctionTool(explorer.list_tables),
                FunctionTool(explorer.describe_table),
                *tools,
            ]
        super().__init__(env, tools, format=format, max_tool_turns=max_tool_turns)
        self.explorer = explorer

    def oracle(self) -> Policy:
        """Explore (list the tables, run the gold query), then submit the gold query."""
        inner: SQLEnv = self.env.unwrapped
        gold = inner.problem.answer
        calls = [("sql", {"query": gold})]
        if "list_tables" in self.tool_map:
            calls.insert(0, ("list_tables", {}))
        steps = iter(
            self.format.format(ToolCall(name, args), self.own_tools) for name, args in calls
        )
        answer = inner.format_answer(gold)
        return lambda observation: next(steps, None) or answer
