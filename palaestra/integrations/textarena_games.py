"""What palaestra knows about each TextArena game it adapts: a well-formed random move and,
where a policy can win, an oracle that reads the game's state (as palaestra's own games'
oracles know the secret).

Every function takes TextArena's raw env of the current episode; moves are in TextArena's
own form (``[up]``, ``[3 5 7]``). Checked against textarena 0.7.4.
"""

from __future__ import annotations

import itertools
import string
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from palaestra.envs.games.sokoban import Level

RandomMove = Callable[[Any, np.random.Generator], str]
OracleMove = Callable[[Any], str]

DIRECTIONS = ("up", "down", "left", "right")


def _pick(rng: np.random.Generator, options: list[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _guess_number(env: Any, rng: np.random.Generator) -> str:
    """A number in range not guessed yet (TextArena counts a repeated guess as invalid)."""
    fresh = [n for n in range(env.min_number, env.max_number + 1) if n not in env.guessed_numbers]
    return f"[{_pick(rng, fresh or [env.min_number])}]"


def _mastermind_code(env: Any, rng: np.random.Generator) -> str:
    digits = rng.choice(env.num_numbers, env.code_length, replace=env.duplicate_numbers)
    return "[" + " ".join(str(int(d) + 1) for d in digits) + "]"


def _minesweeper_cell(env: Any, rng: np.random.Generator) -> str:
    hidden = [(r, c) for r in range(env.rows) for c in range(env.cols) if not env.revealed[r][c]]
    row, col = _pick(rng, hidden or [(0, 0)])
    return f"[{row} {col}]"


def _sudoku_cell(env: Any, rng: np.random.Generator) -> str:
    board = env.state.game_state["board"]
    empty = [(r, c) for r in range(9) for c in range(9) if board[r][c] == 0]
    row, col = _pick(rng, empty or [(0, 0)])
    return f"[{row + 1} {col + 1} {int(rng.integers(1, 10))}]"


def _lights_out_cell(env: Any, rng: np.random.Generator) -> str:
    return f"[{int(rng.integers(env.size))} {int(rng.integers(env.size))}]"


def _rush_hour_move(env: Any, rng: np.random.Generator) -> str:
    """A random move of a car that can move (TextArena counts a blocked move as invalid)."""
    vehicles = env.state.game_state["vehicles"]
    moves = [
        f"[{vid}{'+' if forward else '-'}]"
        for vid, vehicle in sorted(vehicles.items())
        for forward in (True, False)
        if env._can_move(vehicles, vehicle, forward)
    ]
    return _pick(rng, moves or ["[X+]"])


def _sokoban_move(env: Any, rng: np.random.Generator) -> str:
    """A random move that does not walk or push into a wall (an invalid move)."""
    moves = [d for d in DIRECTIONS if not env._would_collide_with_wall(d)]
    return f"[{_pick(rng, moves or list(DIRECTIONS))}]"


def _set_cards(env: Any, rng: np.random.Generator) -> str:
    cards = rng.choice(len(env.state.game_state["board"]), 3, replace=False) + 1
    return "[" + ", ".join(str(int(c)) for c in cards) + "]"


def _crossword_letter(env: Any, rng: np.random.Generator) -> str:
    board = env.state.game_state["board"]
    open_cells = [
        (r, c) for r, row in enumerate(board) for c, cell in enumerate(row) if cell == "_"
    ]
    row, col = _pick(rng, open_cells or [(0, 0)])
    return f"[{row} {col} {_pick(rng, list(string.ascii_uppercase))}]"


def _logic_mark(env: Any, rng: np.random.Generator) -> str:
    grid = env.game_board[_pick(rng, sorted(env.game_board))]
    row = _pick(rng, sorted(grid))
    return f"[{row} {_pick(rng, sorted(grid[row]))} {_pick(rng, ['X', 'O'])}]"


def _slitherlink_edge(env: Any, rng: np.random.Generator) -> str:
    if rng.random() < 0.5:
        return f"[h {int(rng.integers(env.R + 1))} {int(rng.integers(env.C))}]"
    return f"[v {int(rng.integers(env.R))} {int(rng.integers(env.C + 1))}]"


RANDOM_MOVES: dict[str, RandomMove] = {
    "Sokoban": _sokoban_move,
    "GuessTheNumber": _guess_number,
    "Mastermind": _mastermind_code,
    "Minesweeper": _minesweeper_cell,
    "Secretary": lambda env, rng: _pick(rng, ["[accept]", "[continue]"]),
    "ThreeCardMonte": lambda env, rng: f"[{int(rng.integers(env.num_cups))}]",
    "Sudoku": _sudoku_cell,
    "LightsOut": _lights_out_cell,
    "RushHour": _rush_hour_move,
    "Set": _set_cards,
    "Crosswords": _crossword_letter,
    "LogicPuzzle": _logic_mark,
    "Slitherlink": _slitherlink_edge,
}
"""A well-formed random move of every adapted game (drawn from ``rng`` only)."""


# -- oracles --------------------------------------------------------------------------------


def _secretary(env: Any) -> str:
    draws, shown = env.state.game_state["draws"], env.state.game_state["current_idx"]
    return "[accept]" if draws[shown - 1] == max(draws) else "[continue]"


def _minesweeper(env: Any) -> str:
    if env.first_move:
        return f"[{env.rows // 2} {env.cols // 2}]"
    safe = [
        (r, c)
        for r in range(env.rows)
        for c in range(env.cols)
        if not env.revealed[r][c] and env.grid[r][c] != -1
    ]
    row, col = safe[0] if safe else (0, 0)
    return f"[{row} {col}]"


def _sudoku(env: Any) -> str:
    board = env.state.game_state["board"]
    row, col = next(((r, c) for r in range(9) for c in range(9) if board[r][c] == 0), (0, 0))
    return f"[{row + 1} {col + 1} {env.full_grid[row][col]}]"


def _crosswords(env: Any) -> str:
    board, solution = env.state.game_state["board"], env.state.game_state["solution"]
    return " ".join(
        f"[{r} {c} {solution[r][c].upper()}]"
        for r, row in enumerate(board)
        for c, cell in enumerate(row)
        if cell == "_"
    )


def _logic_puzzle(env: Any) -> str:
    marks = [
        f"[{row} {col} {mark}]"
        for name, grid in env.game_board_solution.items()
        for row, cols in grid.items()
        for col, mark in cols.items()
        if env.game_board[name][row][col] != mark
    ]
    return " ".join(marks)


def _lights_out(env: Any) -> str:
    """Light chasing: every first-row press pattern, chased down, until one clears the grid."""
    grid = env.state.game_state["grid"]
    size = env.size
    for first_row in itertools.product((False, True), repeat=size):
        lights = [list(row) for row in grid]
        presses = [(0, c) for c in range(size) if first_row[c]]
        for r, c in presses:
            _toggle(lights, r, c, size)
        for r in range(1, size):
            for c in range(size):
                if lights[r - 1][c]:
                    presses.append((r, c))
                    _toggle(lights, r, c, size)
        if not any(any(row) for row in lights) and presses:
            return f"[{presses[0][0]} {presses[0][1]}]"
    return "[0 0]"


def _toggle(lights: list[list[bool]], row: int, col: int, size: int) -> None:
    for dr, dc in ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)):
        if 0 <= row + dr < size and 0 <= col + dc < size:
            lights[row + dr][col + dc] = not lights[row + dr][col + dc]


def _set(env: Any) -> str:
    board = env.state.game_state["board"]
    for trio in itertools.combinations(range(len(board)), 3):
        if all(len({board[i][k] for i in trio}) in (1, 3) for k in range(4)):
            return "[" + ", ".join(str(i + 1) for i in trio) + "]"
    return "[1, 2, 3]"


def _rush_hour(env: Any) -> str:
    """The first move of a shortest solution: BFS over the cars' offsets along their axes."""
    size = env.BOARD_SIZE
    cars = sorted(env.state.game_state["vehicles"].values(), key=lambda v: v.vid)
    start = tuple(v.col if v.horizontal else v.row for v in cars)
    target = next(i for i, v in enumerate(cars) if v.vid == "X")

    def cells(i: int, at: int) -> list[tuple[int, int]]:
        car = cars[i]
        if car.horizontal:
            return [(car.row, at + k) for k in range(car.length)]
        return [(at + k, car.col) for k in range(car.length)]

    first: dict[tuple[int, ...], str | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if state[target] >= size - cars[target].length:
            return first[state] or "[X+]"
        taken = {cell for i, at in enumerate(state) for cell in cells(i, at)}
        for i, at in enumerate(state):
            for step, sign in ((1, "+"), (-1, "-")):
                lead = cells(i, at + step)[-1 if step > 0 else 0]
                if not (0 <= lead[0] < size and 0 <= lead[1] < size) or lead in taken:
                    continue
                moved = (*state[:i], at + step, *state[i + 1 :])
                if moved not in first:
                    first[moved] = first[state] or f"[{cars[i].vid}{sign}]"
                    queue.append(moved)
    return "[X+]"


def _sokoban(env: Any) -> str:
    """The first move of a shortest solution (palaestra's own Sokoban search)."""
    fixed, room = env.room_fixed, env.room_state  # square rooms: 0 wall, 2 target, 3/4 box
    size = len(fixed) - 2  # inside the border wall, as palaestra's levels count
    inside = [(r, c) for r in range(1, size + 1) for c in range(1, size + 1)]
    level = Level(
        size,
        frozenset(cell for cell in inside if fixed[cell] == 0),
        frozenset(cell for cell in inside if fixed[cell] == 2),
    )
    player = (int(env.player_position[0]), int(env.player_position[1]))
    boxes = tuple(sorted(cell for cell in inside if room[cell] in (3, 4)))
    plan = level.shortest_solution((player, boxes))
    return f"[{plan[0]}]" if plan else "[up]"


def record_slitherlink_solution(env: Any) -> None:
    """Keep the loop Slitherlink draws its clues from (``env.palaestra_solution``): the game
    generates it in ``_generate_random_loop`` and forgets it."""
    generate = env._generate_random_loop

    def recording(h_edges: set[Any], v_edges: set[Any]) -> None:
        generate(h_edges, v_edges)
        env.palaestra_solution = (h_edges, v_edges)

    env._generate_random_loop = recording


def _slitherlink(env: Any) -> str:
    """Toggle an edge where the board differs from the loop the clues came from."""
    h_solution, v_solution = env.palaestra_solution
    for kind, drawn, solution in (("h", env.h_edges, h_solution), ("v", env.v_edges, v_solution)):
        wrong = sorted(drawn ^ solution)
        if wrong:
            return f"[{kind} {wrong[0][0]} {wrong[0][1]}]"
    return "[h 0 0]"


PREPARE: dict[str, Callable[[Any], None]] = {"Slitherlink": record_slitherlink_solution}
"""Hooks run once on a game's raw env, before its first reset (what an oracle needs)."""


ORACLES: dict[str, OracleMove] = {
    "GuessTheNumber": lambda env: f"[{env.game_number}]",
    "Mastermind": lambda env: "[" + " ".join(map(str, env.state.game_state["secret_code"])) + "]",
    "Secretary": _secretary,
    "ThreeCardMonte": lambda env: f"[{env.ball_pos}]",
    "Minesweeper": _minesweeper,
    "Sudoku": _sudoku,
    "Crosswords": _crosswords,
    "LogicPuzzle": _logic_puzzle,
    "LightsOut": _lights_out,
    "Set": _set,
    "RushHour": _rush_hour,
    "Sokoban": _sokoban,
    "Slitherlink": _slitherlink,
}
"""A move of a policy that wins, per game (every adapted game has one)."""
