"""Steps per second of each game shared with GEM, palaestra's and GEM's side by side.

Each episode is replayed from a move list made before the clock starts, so only the env is
timed (reset and every step): the same kind of moves on both sides, winning play where the
game allows it (tower of hanoi: the optimal solution; mastermind: five distinct valid guesses,
then the code; sudoku: every empty cell filled with its solution digit; guess the number:
binary search; minesweeper: every safe cell revealed), and the same random moves on both
sides where a winning line is not at hand (sokoban, 2048: level generation is timed with
the reset). GEM's wordle and hangman need the NLTK words corpus, downloaded at run time, so
they cannot be measured offline. GEM's envs read their secret from their own state to build the winning
moves; palaestra's from theirs. Variants alternate over rounds and keep their best round.

    python benchmarks/bench_games_vs_gem.py --episodes 300 --rounds 3
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

import gem

import palaestra
from palaestra.envs.games.hanoi import PEGS, next_optimal_move

Episode = tuple[Callable[[], object], list[str]]
"""A reset callable and the moves to replay after it."""


def hanoi_moves(pegs: list[list[int]], disks: int, target: int) -> list[str]:
    pegs = [list(p) for p in pegs]
    moves = []
    while (move := next_optimal_move(tuple(map(tuple, pegs)), disks, target)) is not None:
        pegs[move[1]].append(pegs[move[0]].pop())
        moves.append(f"\\boxed{{{PEGS[move[0]]} {PEGS[move[1]]}}}")
    return moves


def palaestra_hanoi(seed: int) -> tuple[object, Episode]:
    env = palaestra.make("game:TowerOfHanoi-Hard-v0")
    env.reset(seed=seed)
    inner = env.unwrapped
    return env, (lambda: env.reset(seed=seed), hanoi_moves(inner.pegs, inner.disks, inner.target))


def gem_hanoi(seed: int) -> tuple[object, Episode]:
    env = gem.make("game:TowerofHanoi-v0-hard")
    env.reset(seed=seed)
    board = [list(env.board[p]) for p in PEGS]
    return env, (lambda: env.reset(seed=seed), hanoi_moves(board, env.num_disks, 2))


def palaestra_mastermind(seed: int) -> tuple[object, Episode]:
    env = palaestra.make("game:Mastermind-v0", max_turns=20)
    env.reset(seed=seed)
    secret = "".join(map(str, env.unwrapped._secret))
    guesses = _distinct_guesses(seed, 4, 6, exclude=secret, join="")
    return env, (lambda: env.reset(seed=seed), [*guesses, f"\\boxed{{{secret}}}"])


def gem_mastermind(seed: int) -> tuple[object, Episode]:
    env = gem.make("game:Mastermind-v0-hard", code_length=4, num_numbers=6, max_turns=20)
    env.reset(seed=seed)
    secret = " ".join(map(str, env.game_code))
    guesses = _distinct_guesses(seed, 4, 6, exclude=secret, join=" ")
    return env, (lambda: env.reset(seed=seed), [*guesses, f"\\boxed{{{secret}}}"])


def _distinct_guesses(seed: int, length: int, colors: int, *, exclude: str, join: str) -> list[str]:
    rng = random.Random(seed)
    guesses: list[str] = []
    while len(guesses) < 5:
        code = join.join(str(rng.randint(1, colors)) for _ in range(length))
        if code != exclude and f"\\boxed{{{code}}}" not in guesses:
            guesses.append(f"\\boxed{{{code}}}")
    return guesses


def palaestra_sudoku(seed: int) -> tuple[object, Episode]:
    env = palaestra.make("game:Sudoku-v0", clues=30)
    env.reset(seed=seed)
    inner = env.unwrapped
    moves = [
        f"\\boxed{{{i // 9 + 1} {i % 9 + 1} {inner.solution[i]}}}"
        for i in range(81)
        if not inner.given[i]
    ]
    return env, (lambda: env.reset(seed=seed), moves)


def gem_sudoku(seed: int) -> tuple[object, Episode]:
    env = gem.make("game:Sudoku-v0-hard", clues=30, max_turns=100, scale=9)
    env.reset(seed=seed)
    moves = [
        f"\\boxed{{{r + 1} {c + 1} {env.full_grid[r][c]}}}"
        for r in range(9)
        for c in range(9)
        if env.board[r][c] == 0
    ]
    return env, (lambda: env.reset(seed=seed), moves)


def palaestra_guess(seed: int) -> tuple[object, Episode]:
    env = palaestra.make("game:GuessTheNumber-v0")
    env.reset(seed=seed)
    return env, (lambda: env.reset(seed=seed), _binary_search(env.unwrapped._secret, 1, 50))


def gem_guess(seed: int) -> tuple[object, Episode]:
    env = gem.make("game:GuessTheNumber-v0-hard", min_number=1, max_number=50, max_turns=10)
    env.reset(seed=seed)
    return env, (lambda: env.reset(seed=seed), _binary_search(env.game_number, 1, 50))


def _binary_search(secret: int, low: int, high: int) -> list[str]:
    moves = []
    while True:
        guess = (low + high) // 2
        moves.append(f"\\boxed{{{guess}}}")
        if guess == secret:
            return moves
        low, high = (guess + 1, high) if guess < secret else (low, guess - 1)


def oracle_moves(env, seed: int) -> list[str]:
    """The moves palaestra's oracle makes in the episode of ``seed`` (played untimed)."""
    observation, _ = env.reset(seed=seed)
    policy, moves = env.oracle(), []
    while True:
        moves.append(policy(observation))
        observation, _, terminated, truncated, _ = env.step(moves[-1])
        if terminated or truncated:
            return moves


def palaestra_minesweeper(seed: int) -> tuple[object, Episode]:
    env = palaestra.make("game:Minesweeper-v0")
    return env, (lambda: env.reset(seed=seed), oracle_moves(env, seed))


def gem_minesweeper(seed: int) -> tuple[object, Episode]:
    """Reveal the centre (GEM lays the mines on the first reveal), then every safe cell still
    hidden, found from GEM's own grid; played untimed once to list the moves."""
    env = gem.make("game:Minesweeper-v0-hard", max_turns=100)
    env.reset(seed=seed)
    moves = ["\\boxed{reveal 4 4}"]
    while not env.step(moves[-1])[2]:
        hidden = [
            (r, c)
            for r in range(env.rows)
            for c in range(env.cols)
            if env.grid[r][c] != -1 and not env.revealed[r][c]
        ]
        if not hidden:
            break
        moves.append(f"\\boxed{{reveal {hidden[0][0]} {hidden[0][1]}}}")
    return env, (lambda: env.reset(seed=seed), moves)


def _random_directions(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [f"\\boxed{{{rng.choice(('up', 'down', 'left', 'right'))}}}" for _ in range(count)]


def palaestra_sokoban(seed: int) -> tuple[object, Episode]:
    env = palaestra.make("game:Sokoban-Hard-v0")
    return env, (lambda: env.reset(seed=seed), _random_directions(seed, 20))


def gem_sokoban(seed: int) -> tuple[object, Episode]:
    env = gem.make("game:Sokoban-v0-easy")
    return env, (lambda: env.reset(seed=seed), _random_directions(seed, 20))


def palaestra_2048(seed: int) -> tuple[object, Episode]:
    env = palaestra.make("game:2048-Easy-v0")
    return env, (lambda: env.reset(seed=seed), _random_directions(seed, 50))


def gem_2048(seed: int) -> tuple[object, Episode]:
    env = gem.make("game:Game2048-v0-easy")
    return env, (lambda: env.reset(seed=seed), _random_directions(seed, 50))


GAMES = {
    "guess the number (1..50)": (palaestra_guess, gem_guess),
    "tower of hanoi (5 disks)": (palaestra_hanoi, gem_hanoi),
    "mastermind (4 of 1-6)": (palaestra_mastermind, gem_mastermind),
    "sudoku (9x9, 30 clues)": (palaestra_sudoku, gem_sudoku),
    "minesweeper (8x8, 10 mines)": (palaestra_minesweeper, gem_minesweeper),
    "sokoban (6x6, 2 boxes; 20 random moves)": (palaestra_sokoban, gem_sokoban),
    "2048 (50 random moves)": (palaestra_2048, gem_2048),
}


def replay(episodes: list[tuple[object, Episode]]) -> tuple[int, float]:
    """Steps taken and seconds spent replaying every episode (reset + moves)."""
    steps = 0
    started = time.perf_counter()
    for env, (reset, moves) in episodes:
        reset()
        for move in moves:
            _, _, terminated, truncated, _ = env.step(move)
            steps += 1
            if terminated or truncated:
                break
    return steps, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(
        "| game | palaestra steps/s | GEM steps/s | palaestra / GEM |\n| --- | ---: | ---: | ---: |"
    )
    for name, (ours, theirs) in GAMES.items():
        sides = [[make(seed) for seed in range(args.episodes)] for make in (ours, theirs)]
        best = [0.0, 0.0]
        for _ in range(args.rounds):
            for index, episodes in enumerate(sides):
                steps, seconds = replay(episodes)
                best[index] = max(best[index], steps / seconds)
        print(f"| {name} | {best[0]:,.0f} | {best[1]:,.0f} | {best[0] / best[1]:.2f}x |")


if __name__ == "__main__":
    main()
