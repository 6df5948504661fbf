"""Text-to-SQL envs: answer a question with one SQL query, graded by execution.

* :class:`SQLEnv` (``sql:Shop-v0`` ...): the schema and a question; the answer is one query,
  written in a ``<solution>`` tag or a fenced ```` ```sql ```` block (the last one counts).
* :class:`SQLToolEnv` (the ``-Tools`` and ``-SQLTag`` variants): the same task with tools to
  explore the database first: ``list_tables``, ``describe_table`` and ``sql`` (run a query,
  rows truncated to a cap); the final answer is submitted as above, without a tool call.

Rewards (``reward=``):

* ``"execution"`` (default): 1 when the answer's result matches the gold query's
  (:func:`palaestra.verifiers.sql.answer_matches`), else 0;
* ``"skyrl"``: SkyRL-SQL's scheme (:mod:`palaestra.verifiers.sql_skyrl`): -1 when the
  episode's text breaks its format (``<think>`` then one ``<solution>``), 0 for a query
  that fails or differs, 1 when the results are equal as sets of rows.

The gold query always runs on the SQLite file; ``backend="duckdb"`` runs the agent's
queries on DuckDB. Every query runs read-only with a time limit and caps on rows and bytes,
so nothing an agent runs changes what any episode sees.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from palaestra.core.env import Policy, StepResult
from palaestra.core.messages import without_reasoning
from palaestra.core.tool_calls import ToolCall
from palaestra.envs.base import AnswerEnv, Grade
from palaestra.envs.sql.databases import DOMAINS, database_path
from palaestra.envs.sql.questions import LEVELS, generate_question
from palaestra.envs.sql.suite import grading_suite
from palaestra.envs.tool_env import ToolEnv
from palaestra.tasks import Problem
from palaestra.tools import FunctionTool, ToolError
from palaestra.verifiers.extract import last_tagged
from palaestra.verifiers.sql import Gold, SQLiteDatabase, answer_matches, lease_database
from palaestra.verifiers.sql_backend import (
    BACKENDS,
    DEFAULT_MAX_ROWS,
    Database,
    QueryResult,
    SQLError,
    open_database,
)
from palaestra.verifiers.sql_compare import has_limit, results_equal_as_sets
from palaestra.verifiers.sql_skyrl import SKYRL_FORMAT_PENALTY, skyrl_observation, skyrl_solution

REWARDS = ("execution", "skyrl")
PRESETS = {"easy": (1, 2), "medium": (1, 2, 3, 4, 5), "hard": (4, 5)}
HELD_OUT_FIRST_SEED = 1_000_000
"""Reset seeds from here on draw held-out databases (the trainer's ``eval_first_seed``); a
reset without a seed draws a database below it."""
OPEN_DATABASES = 8
"""Databases an env keeps in use (the most recently used), besides its test suite's: held
against the cache's eviction, open once in the process for every env."""
DEFAULT_SUITE = 1
"""Databases of other seeds a generated question's answer must also be right on (test-suite
grading; with :data:`DEFAULT_FUZZED`, chosen in benchmarks/RESULTS.md: near misses caught
against check cost). One keeps a memorised answer from passing."""
DEFAULT_FUZZED = 1
"""Copies of the episode's database made to tell a generated question's gold from its near
misses (:mod:`palaestra.envs.sql.suite`) an answer must also be right on (measured in
benchmarks/RESULTS.md)."""
MAX_CELL_CHARS = 500
"""The most characters the ``sql`` tool shows of one value."""
MAX_OBSERVATION_CHARS = 8_000
"""The most characters of rows the ``sql`` tool shows in one observation."""
_FENCED_SQL = re.compile(r"```sql[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)

SYSTEM_PROMPT = (
    "You answer questions about a {dialect} database by writing one SQL query. Think step "
    "by step, then give the final query inside <solution>...</solution> (or a ```sql code "
    "block); only the last one counts. Return exactly the columns the question asks for, "
    "and numbers at full precision (do not round unless asked)."
)
SKYRL_SYSTEM_PROMPT = (
    "You answer questions about a {dialect} database by writing one SQL query. First think "
    "inside <think>...</think>; then give the final query inside <solution>...</solution>, "
    "exactly once. After each tool result (an <observation>), start with <think> again."
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


@functools.lru_cache(maxsize=4096)
def dialect_forms(sql: str, dialect: str) -> tuple[str, ...]:
    """A SQLite gold query in ``dialect`` (for an oracle that answers on another backend;
    never used to grade: the gold always runs on SQLite): sqlglot's translation, then one
    with each bare column beside an aggregate wrapped in ``ANY_VALUE`` (SQLite takes such a
    column from any row of the group; the caller checks the result)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.SqlglotError:
        return ()
    forms = [tree.sql(dialect=dialect)]
    for select in tree.find_all(exp.Select):
        _wrap_bare_columns(select)
    forms.append(tree.sql(dialect=dialect))
    return tuple(dict.fromkeys(forms))


def _wrap_bare_columns(select: Any) -> None:
    """In a grouped SELECT, each output column neither grouped on nor inside an aggregate
    becomes ``ANY_VALUE(column)``, keeping its output name."""
    from sqlglot import exp

    group = select.args.get("group")
    aggregated = group is not None or any(
        projection.find(exp.AggFunc) for projection in select.expressions
    )
    if not aggregated:
        return
    grouped = {g.sql() for g in group.expressions} if group is not None else set()
    for projection in select.expressions:
        column = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(column, exp.Column) and column.sql() not in grouped:
            wrapped = exp.AnyValue(this=column.copy())
            if isinstance(projection, exp.Alias):
                projection.set("this", wrapped)
            else:
                projection.replace(exp.alias_(wrapped, column.name))


class RecentlyUsed(OrderedDict[Any, Any]):
    """At most ``capacity`` values, the least recently used dropped (and closed) first."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity

    def get_or_add(self, key: Any, make: Callable[[], Any]) -> Any:
        if key in self:
            self.move_to_end(key)
            return self[key]
        value = self[key] = make()
        while len(self) > self.capacity:
            _, dropped = self.popitem(last=False)
            if hasattr(dropped, "close"):
                dropped.close()
        return value

    def close(self) -> None:
        for value in self.values():
            if hasattr(value, "close"):
                value.close()
        self.clear()


class SQLEnv(AnswerEnv):
    """A question about a database; the answer is one query (see module docstring).

    Subclasses serve problems whose ``data["db_path"]`` names the SQLite file and whose
    ``answer`` is the gold query (SQLite): :class:`SyntheticSQL` and :class:`SQLDataset`.
    """

    def __init__(
        self,
        *,
        backend: str = "sqlite",
        reward: str = "execution",
        timeout: float = 5.0,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_attempts: int = 1,
        attempt_cost: float = 0.0,
        suite: int = DEFAULT_SUITE,
        fuzzed: int = DEFAULT_FUZZED,
        render_mode: str | None = None,
    ):
        super().__init__(
            max_attempts=max_attempts, attempt_cost=attempt_cost, render_mode=render_mode
        )
        if not 0 <= suite <= 64:
            raise ValueError(f"suite must be 0 to 64 databases, got {suite}")
        if not 0 <= fuzzed <= 16:
            raise ValueError(f"fuzzed must be 0 to 16 databases, got {fuzzed}")
        self.suite = suite
        self.fuzzed = fuzzed
        if reward not in REWARDS:
            raise ValueError(f"unknown reward {reward!r}; choose one of {REWARDS}")
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {sorted(BACKENDS)}")
        self.reward = reward
        self.reward_range = (SKYRL_FORMAT_PENALTY, 1.0) if reward == "skyrl" else (0.0, 1.0)
        self.timeout = timeout
        self.max_rows = max_rows
        self.backend = backend
        prompt = SKYRL_SYSTEM_PROMPT if reward == "skyrl" else SYSTEM_PROMPT
        self.system_prompt = prompt.format(dialect="DuckDB" if backend == "duckdb" else "SQLite")
        self._sqlite = RecentlyUsed(OPEN_DATABASES + suite + fuzzed)
        self._answering = RecentlyUsed(OPEN_DATABASES + suite + fuzzed)
        self._golds = RecentlyUsed(64)
        self._exchanges: list[str] = []

    # -- the database of the current problem ------------------------------------------------

    @property
    def db_path(self) -> Path:
        return Path(self.problem.data["db_path"])

    def hold(self, path: Path) -> None:
        """Hold the file at ``path`` for this env: a lease on the process's shared SQLite
        database of it (:func:`~palaestra.verifiers.sql.lease_database`; an open database
        holds its file, and one an env uses is never closed). The env keeps leases on its
        most recently used files, so no cache deletes them until it lets go. Given to the
        cache's builders (``hold=``), which call it before evicting anything; a file that
        went before it was held is built again."""
        self.sqlite(Path(path))

    def sqlite(self, path: Path | None = None) -> SQLiteDatabase:
        """The SQLite database at ``path`` (default: this problem's), where gold queries
        run: one per file in the process, shared by every env (use its connection under
        :meth:`~palaestra.verifiers.sql.SQLiteDatabase.locked`)."""
        path = path or self.db_path
        return self._sqlite.get_or_add(path, lambda: lease_database(path)).database

    def database(self, path: Path | None = None) -> Database:
        """The database at ``path`` (default: this problem's) on this env's backend, where
        the agent's queries run."""
        path = path or self.db_path
        if self.backend == "sqlite":
            return self.sqlite(path)
        return self._answering.get_or_add(path, lambda: open_database(path, self.backend))

    def query(self, sql: str, max_rows: int | None = None) -> QueryResult:
        """Run ``sql`` on this problem's database (read-only, time limit, row cap)."""
        return self.database().query(sql, timeout=self.timeout, max_rows=max_rows or self.max_rows)

    def gold(self, path: Path | None = None) -> Gold:
        """The gold query's result on the SQLite file at ``path`` (default: this problem's;
        a failing gold raises)."""
        path = path or self.db_path
        return self._golds.get_or_add(
            (path, self.problem.answer),
            lambda: Gold.run(
                self.sqlite(path), self.problem.answer, timeout=self.timeout, max_rows=self.max_rows
            ),
        )

    def suite_paths(self) -> list[Path]:
        """The other databases an answer must also be right on (test-suite grading; none
        here: :class:`SyntheticSQL` generates them)."""
        return []

    def right_on_suite(self, sql: str) -> bool:
        """Whether ``sql`` also gives the gold's answer on every database of
        :meth:`suite_paths` where the gold runs (one with LIMIT is judged on the episode's
        database only: rows may tie at the cut elsewhere)."""
        if has_limit(self.problem.answer):
            return True
        for path in self.suite_paths():
            try:
                gold = self.gold(path)
            except SQLError:
                continue  # the gold cannot run there: no verdict from this database
            try:
                result = self.database(path).query(
                    sql, timeout=self.timeout, max_rows=self.max_rows
                )
            except SQLError:
                return False
            if not answer_matches(result, gold):
                return False
        return True

    # -- grading ----------------------------------------------------------------------------

    @staticmethod
    def prompt(schema: str, question: str, evidence: str | None = None) -> str:
        hint = f"\nHint: {evidence}" if evidence else ""
        return f"Database schema:\n{schema}\n\nQuestion: {question}{hint}"

    def record_exchange(self, action: str, observation: str) -> None:
        """Note a tool turn (the action and the observation shown): SkyRL-SQL's reward reads
        the whole text of the turns since the last answer."""
        self._exchanges += [action, observation]

    def grade(self, action: str, problem: Problem) -> Grade:
        transcript = "".join([*self._exchanges, action])
        self._exchanges.clear()
        if self.reward == "skyrl":
            return self._grade_skyrl(transcript)
        sql = extract_sql(action)
        if sql is None:
            feedback = "No query found: give it in <solution>...</solution>."
            return Grade(0.0, False, feedback, {"malformed": 1.0})
        gold = self.gold()
        try:
            result = self.query(sql)
        except SQLError as error:
            kind = "malformed" if error.syntax else "execution_error"
            verb = "does not parse" if error.syntax else "failed"
            return Grade(0.0, False, f"The query {verb}: {error}", {kind: 1.0})
        if not answer_matches(result, gold):
            shown = _shown(result)
            return Grade(0.0, False, f"The query ran but returned the wrong result ({shown}).")
        if not self.right_on_suite(sql):
            feedback = (
                "The query returns the right rows on this database but not on other databases "
                "of the same schema: it depends on this data, not on the question."
            )
            return Grade(0.0, False, feedback, {"suite_miss": 1.0})
        return Grade(1.0, True, "Correct.")

    def _grade_skyrl(self, transcript: str) -> Grade:
        sql = skyrl_solution(transcript)
        if sql is None:
            feedback = (
                "Wrong format: think inside <think>...</think>, then give exactly one "
                "<solution>...</solution>."
            )
            return Grade(SKYRL_FORMAT_PENALTY, False, feedback, {"malformed": 1.0})
        gold = self.gold()
        try:
            result = self.query(sql)
        except SQLError as error:
            return Grade(0.0, False, f"The query failed: {error}", {"execution_error": 1.0})
        if not result.truncated and results_equal_as_sets(result.rows, gold.rows):
            return Grade(1.0, True, "Correct.")
        return Grade(0.0, False, f"The query ran but returned the wrong result ({_shown(result)}).")

    def oracle(self) -> Policy:
        """Answers with the gold query (in this env's dialect: :meth:`oracle_query`)."""
        text = self.format_answer(self.oracle_query())
        return lambda observation: text

    def oracle_query(self) -> str:
        """The gold query in this env's dialect, checked to give the gold's answer on this
        episode's database; NotImplementedError saying why when no form found does (a
        SQLite gold that selects bare columns beside an aggregate has no DuckDB twin)."""
        gold, dialect = self.problem.answer, self.database().dialect
        if dialect == "sqlite":
            return gold
        reason = "sqlglot cannot translate it"
        for candidate in dialect_forms(gold, dialect):
            try:
                result = self.query(candidate)
            except SQLError as error:
                reason = str(error).splitlines()[0]
                continue
            if answer_matches(result, self.gold()):
                return candidate
            reason = "its translation returns another result"
        raise NotImplementedError(
            f"no oracle on {dialect} for this episode: the gold query {gold!r} has no "
            f"{dialect} form found that gives its answer ({reason}); use backend='sqlite'"
        )

    def format_answer(self, answer: str) -> str:
        if self.reward == "skyrl":
            return f"<think>The gold query answers it.</think>\n<solution>{answer}</solution>"
        return f"<solution>{answer}</solution>"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._exchanges.clear()
        return super().reset(seed=seed, options=options)

    def render_text(self) -> str:
        if self._problem is None:
            return "(not reset)"
        return f"{self.db_path.name}: {self._problem.prompt.rsplit('Question: ', 1)[-1]}"

    def close(self) -> None:
        self._golds.clear()
        self._answering.close()
        self._sqlite.close()
        super().close()


def _shown(result: QueryResult) -> str:
    return f"{len(result.rows)}{'+' if result.truncated else ''} rows"


class SyntheticSQL(SQLEnv):
    """Generated questions over generated databases (``palaestra.envs.sql.databases``).

    ``domain`` is one of :data:`~palaestra.envs.sql.databases.DOMAINS` (``"mixed"``: any of
    them per episode); ``difficulty`` picks the question levels (easy: filters and joins;
    medium: all five; hard: nested queries and set operations, window functions).
    ``db_seed``: None (default) draws the database from the reset seed, so each seed has
    its own data and seeds from :data:`HELD_OUT_FIRST_SEED` on have held-out ones; an int
    pins one database for every episode.
    """

    def __init__(
        self,
        domain: str = "shop",
        difficulty: str = "medium",
        *,
        db_seed: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if domain != "mixed" and domain not in DOMAINS:
            raise ValueError(f"unknown domain {domain!r}; choose one of {[*DOMAINS, 'mixed']}")
        if difficulty not in PRESETS:
            raise ValueError(f"unknown difficulty {difficulty!r}; choose one of {sorted(PRESETS)}")
        self.domains = sorted(DOMAINS) if domain == "mixed" else [domain]
        for cache in (self._sqlite, self._answering):  # every domain's suite stays open
            cache.capacity = OPEN_DATABASES + self.suite * len(self.domains) + self.fuzzed
        self.levels = PRESETS[difficulty]
        self.db_seed = db_seed
        self._drawn = RecentlyUsed(64)  # seed -> (problem, RNG state after drawing it)

    def suite_paths(self) -> list[Path]:
        """:data:`suite` databases of this episode's domain from seeds no episode draws,
        then :data:`fuzzed` copies of the episode's database made to tell the gold from its
        near misses (:func:`~palaestra.envs.sql.suite.grading_suite`; none for a gold
        with LIMIT)."""
        domain, gold = self.problem.data["domain"], self.problem.answer
        return grading_suite(
            domain, self.db_path, gold, seeds=self.suite, fuzzed=self.fuzzed, hold=self.hold
        )

    def database_seed(self, seed: int | None) -> int:
        """The seed of this episode's database (see the class docstring)."""
        if self.db_seed is not None:
            return self.db_seed
        if seed is not None:
            return seed
        return int(self.np_random.integers(HELD_OUT_FIRST_SEED))

    def new_problem(self, seed: int | None, options: dict[str, Any]) -> Problem:
        """The problem of ``seed``, drawn once per seed and kept (a GRPO group replays a
        seed); the RNG is left as drawing it leaves it."""
        if seed is None:
            return self._draw_problem(None)
        problem, state = self._drawn.get_or_add(
            seed, lambda: (self._draw_problem(seed), self.np_random.bit_generator.state)
        )
        self.np_random.bit_generator.state = state
        domain, db_seed = problem.data["domain"], problem.data["db_seed"]
        database_path(domain, db_seed, hold=self.hold)  # held again; built again if evicted
        return problem

    def _draw_problem(self, seed: int | None) -> Problem:
        domain = self.domains[int(self.np_random.integers(len(self.domains)))]
        db_seed = self.database_seed(seed)
        path = database_path(domain, db_seed, hold=self.hold)
        # questions draw their values with SQLite, whatever the backend
        with self.sqlite(path).locked() as connection:
            question = generate_question(domain, connection, self.np_random, levels=self.levels)
        data = {
            "db_path": str(path),
            "db_seed": db_seed,
            "domain": domain,
            "level": question.level,
            "intent": question.intent,
        }
        schema = self.database(path).schema()
        return Problem(self.prompt(schema, question.text), question.gold_sql, data=data)

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
        """Run a read-only query and see its first rows.

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
    """A result as a small pipe-separated table, with a note when rows were cut. Each cell
    shows at most :data:`MAX_CELL_CHARS` characters and the table at most
    :data:`MAX_OBSERVATION_CHARS`, whatever the query returned."""
    lines = [" | ".join(_cell(c) for c in columns)]
    size = len(lines[0])
    for row in rows:
        line = " | ".join(_cell(v) for v in row)
        if size + len(line) > MAX_OBSERVATION_CHARS:
            lines.append(f"(only the first {len(lines) - 1} rows are shown: the rest is too long)")
            return "\n".join(lines)
        lines.append(line)
        size += len(line) + 1
    if truncated:
        lines.append(f"(only the first {cap} rows are shown)")
    elif not rows:
        lines.append("(no rows)")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    """One value as the tool shows it: NULL, or its text cut at :data:`MAX_CELL_CHARS`."""
    text = "NULL" if value is None else str(value)
    if len(text) <= MAX_CELL_CHARS:
        return text
    return f"{text[:MAX_CELL_CHARS]}... ({len(text):,} characters)"


class SQLToolEnv(ToolEnv):
    """An :class:`SQLEnv` with exploration tools (see module docstring). ``format="tags"``
    gives SkyRL-SQL's shape: ``<sql>query</sql>`` explores, the result comes back in an
    ``<observation>`` block, ``<solution>`` answers."""

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
        self.sql_env = inner

    def step(self, action: str) -> StepResult:
        if self._answers(action):
            return self._count(self.env.step(action))
        return self._shown(action, super().step(action))

    async def astep(self, action: str) -> StepResult:
        if self._answers(action):
            return self._count(await self.env.astep(action))
        return self._shown(action, await super().astep(action))

    def _answers(self, action: str) -> bool:
        """With tags, a turn holding a whole ``<solution>`` outside its reasoning answers even
        if it also has a ``<sql>`` tag (SkyRL-SQL ends the episode on it)."""
        said = without_reasoning(action)
        return self.format.name == "tags" and "<solution>" in said and "</solution>" in said

    def _shown(self, action: str, result: StepResult) -> StepResult:
        """A tool turn's observation as the agent sees it (in an ``<observation>`` block for
        tags), noted for SkyRL-SQL's reward; under that reward, running out of turns without
        a solution scores its format penalty, as in SkyRL-SQL."""
        observation, reward, terminated, truncated, info = result
        if info.get("role") == "tool":
            if self.format.name == "tags":
                observation = skyrl_observation(observation)
            self.sql_env.record_exchange(action, observation)
        if truncated and self.sql_env.reward == "skyrl":
            reward = SKYRL_FORMAT_PENALTY
        return observation, reward, terminated, truncated, info

    def oracle(self) -> Policy:
        """Explore (list the tables, run the gold query), then submit the gold query."""
        gold = self.sql_env.oracle_query()
        calls = [("sql", {"query": gold})]
        if "list_tables" in self.tool_map:
            calls.insert(0, ("list_tables", {}))
        steps = iter(
            self.format.format(ToolCall(name, args), self.own_tools) for name, args in calls
        )
        answer = self.sql_env.format_answer(gold)
        if self.sql_env.reward == "skyrl":  # every turn thinks first
            steps = (f"<think>Let me look.</think>\n{step}" for step in steps)
        return lambda observation: next(steps, None) or answer
