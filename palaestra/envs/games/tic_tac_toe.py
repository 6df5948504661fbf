"""Tic-tac-toe against a minimax opponent that never misses a win or a block, and blunders
with a set probability otherwise."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import left, parse_move

Board = tuple[str, ...]  # 9 cells, each "X", "O" or " "; cell i is square i + 1

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))

PRESETS: dict[str, dict[str, float]] = {
    "easy": {"blunder_prob": 0.6},
    "medium": {"blunder_prob": 0.3},
    "hard": {"blunder_prob": 0.0},
}

REWARD = {"win": 1.0, "draw": 0.5, "loss": 0.0, "out_of_turns": 0.0}
OUTCOME_TEXT = {
    "win": "Three in a row: you win!",
    "loss": "Three in a row: I win.",
    "draw": "The board is full: a draw.",
    "out_of_turns": "You are out of turns, so you lose.",
}

SYSTEM_PROMPT = (
    "You are playing tic-tac-toe. Think step by step, then give the number of the square you "
    "take inside \\boxed{}, for example \\boxed{5}."
)


def winner(board: Board) -> str | None:
    """``"X"`` or ``"O"`` if that player has three in a row, else None."""
    for a, b, c in LINES:
        if board[a] != " " and board[a] == board[b] == board[c]:
            return board[a]
    return None


def legal_moves(board: Board) -> list[int]:
    return [i for i, cell in enumerate(board) if cell == " "]


@functools.cache
def minimax_value(board: Board, to_move: str) -> int:
    """Game value for ``to_move`` under perfect play: +(10 - plies) for a win, 0 for a draw.

    Preferring quicker wins (and slower losses) makes the players finish games cleanly.
    """
    won = winner(board)
    if won is not None:
        plies = 9 - board.count(" ")
        return (10 - plies) if won == to_move else -(10 - plies)
    moves = legal_moves(board)
    if not moves:
        return 0
    other = "O" if to_move == "X" else "X"
    return max(-minimax_value(_play(board, move, to_move), other) for move in moves)


def best_moves(board: Board, to_move: str) -> list[int]:
    """All moves that keep the minimax value."""
    other = "O" if to_move == "X" else "X"
    scores = {
        move: -minimax_value(_play(board, move, to_move), other) for move in legal_moves(board)
    }
    top = max(scores.values())
    return [move for move, score in scores.items() if score == top]


def forced_moves(board: Board, mark: str) -> list[int]:
    """The moves that win at once for ``mark``, else those that stop the other player from
    winning at once (empty when neither exists)."""
    other = "O" if mark == "X" else "X"
    for player in (mark, other):
        moves = [m for m in legal_moves(board) if winner(_play(board, m, player)) == player]
        if moves:
            return moves
    return []


def _play(board: Board, move: int, mark: str) -> Board:
    return (*board[:move], mark, *board[move + 1 :])


def render_board(board: Board) -> str:
    """The board with free squares numbered 1-9."""
    cells = [cell if cell != " " else str(i + 1) for i, cell in enumerate(board)]
    rows = [" " + " | ".join(cells[r * 3 : r * 3 + 3]) for r in range(3)]
    return "\n---+---+---\n".join(rows)


class TicTacToe(TurnBasedEnv):
    """Tic-tac-toe against a minimax opponent that sometimes blunders into a random move.

    The opponent always takes a win in one move and blocks the agent's; otherwise it plays
    a random legal move with probability ``blunder_prob`` (easy 0.6, medium 0.3, hard 0)
    and a minimax move else. (An opponent that also missed those let a player who never
    looked at the board, taking squares 1, 2, 3, ... in turn, win 54% of easy games against
    30% for random moves; one that blundered more often lost to a fixed corners-first
    order.) The oracle wins 47% / 20% / 0% of easy / medium / hard games (300 seeds) and
    never loses. The agent plays X (moves first) or, with ``agent_first=False``, O.
    Reward at the end of
    the game: win 1, draw 0.5, loss 0; illegal or unreadable moves get 0, change nothing and
    count toward ``max_turns`` (running out of turns is a loss). ``info["success"]`` is True
    for a win only: a draw earns 0.5 but is not a success. Against the perfect opponent
    (``hard``) a draw is the best anyone can do, so no policy succeeds there and
    ``oracle_always_wins`` is False (the oracle never loses, and wins whenever the opponent
    blunders into a lost position).
    """

    threaded_step = False
    oracle_always_wins = False

    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        blunder_prob: float | None = None,
        agent_first: bool = True,
        max_turns: int = 10,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        preset = difficulty_preset(PRESETS, difficulty)
        self.blunder_prob = preset["blunder_prob"] if blunder_prob is None else blunder_prob
        if not 0.0 <= self.blunder_prob <= 1.0:
            raise ValueError(f"blunder_prob must be in [0, 1], got {self.blunder_prob}")
        if max_turns < 5:
            raise ValueError(f"max_turns must be >= 5 (a game can need 5 moves), got {max_turns}")
        self.agent_first = agent_first
        self.max_turns = max_turns
        self.agent_mark, self.opponent_mark = ("X", "O") if agent_first else ("O", "X")
        self._board: Board = (" ",) * 9

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        self._board = (" ",) * 9
        self.start()
        intro = f"Let's play tic-tac-toe. You are {self.agent_mark}, I am {self.opponent_mark}."
        if not self.agent_first:
            move = self._opponent_move()
            self._board = _play(self._board, move, self.opponent_mark)
            intro += f" I took square {move + 1}."
        task = (
            f"{intro} Squares are numbered 1-9, left to right, top to bottom; free squares show "
            f"their number.\n\n{render_board(self._board)}\n\nYour move: give a free square's "
            "number inside \\boxed{}, for example \\boxed{5}."
        )
        return task, {"role": "user"}

    def play(self, action: str) -> StepResult:
        move = _parse_square(parse_move(action))
        if move is None or self._board[move] != " ":
            reason = (
                "I could not read a square number."
                if move is None
                else "That is not a free square."
            )
            return self._continue(
                f"{reason} Give a free square's number (1-9) inside \\boxed{{}}.\n\n{render_board(self._board)}"
            )
        self._board = _play(self._board, move, self.agent_mark)
        if outcome := self._outcome():
            return self._end(render_board(self._board), outcome)
        reply = self._opponent_move()
        self._board = _play(self._board, reply, self.opponent_mark)
        text = f"I took square {reply + 1}.\n\n{render_board(self._board)}"
        if outcome := self._outcome():
            return self._end(text, outcome)
        return self._continue(f"{text}\n\nYour move.")

    def _opponent_move(self) -> int:
        forced = forced_moves(self._board, self.opponent_mark)
        if forced:
            options = forced
        elif self.np_random.random() < self.blunder_prob:
            options = legal_moves(self._board)
        else:
            options = best_moves(self._board, self.opponent_mark)
        return int(options[int(self.np_random.integers(len(options)))])

    def _outcome(self) -> str | None:
        """``"win"``/``"loss"``/``"draw"`` from the agent's side once the game is decided."""
        won = winner(self._board)
        if won is not None:
            return "win" if won == self.agent_mark else "loss"
        return None if legal_moves(self._board) else "draw"

    def _end(self, text: str, outcome: str) -> StepResult:
        observation = f"{text}\n\n{OUTCOME_TEXT[outcome]}"
        won = outcome == "win"
        result = self.finish(observation, REWARD[outcome], won, win=float(won))
        result[4]["outcome"] = outcome
        return result

    def _continue(self, observation: str) -> StepResult:
        if self.turns_left() <= 0:
            return self._end(observation, "out_of_turns")
        return self.proceed(f"{observation}\n{left(self.turns_left(), 'turn')}")

    def oracle(self) -> Policy:
        """Perfect play: a minimax-optimal move that wins fastest (never loses)."""
        return lambda observation: (
            "\\boxed{" + str(best_moves(self._board, self.agent_mark)[0] + 1) + "}"
        )

    def random_action(self, rng: np.random.Generator) -> str:
        moves = legal_moves(self._board) or list(range(9))
        return "\\boxed{" + str(int(moves[int(rng.integers(len(moves)))]) + 1) + "}"

    def render_text(self) -> str:
        return render_board(self._board)


def _parse_square(move: str | None) -> int | None:
    if move is None or len(move) != 1 or move not in "123456789":
        return None
    return int(move) - 1
