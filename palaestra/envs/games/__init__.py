"""Text games. Each has difficulty variants (``-Easy``/``-Hard``; the plain id is medium) and an oracle."""

from palaestra.core.registry import register

_VARIANTS = {"Easy": {"difficulty": "easy"}, "Hard": {"difficulty": "hard"}}

register(
    "game:GuessTheNumber-v0",
    "palaestra.envs.games.guess_the_number:GuessTheNumber",
    variants=_VARIANTS,
)
register("game:Wordle-v0", "palaestra.envs.games.wordle:Wordle", variants=_VARIANTS)
register("game:TicTacToe-v0", "palaestra.envs.games.tic_tac_toe:TicTacToe", variants=_VARIANTS)
register("game:TowerOfHanoi-v0", "palaestra.envs.games.hanoi:TowerOfHanoi", variants=_VARIANTS)
register("game:Mastermind-v0", "palaestra.envs.games.mastermind:Mastermind", variants=_VARIANTS)
register(
    "game:FrozenLake-v0",
    "palaestra.envs.games.frozen_lake:FrozenLake",
    variants={**_VARIANTS, "Slippery": {"difficulty": "easy", "slippery": True}},
)
register("game:Sudoku-v0", "palaestra.envs.games.sudoku:Sudoku", variants=_VARIANTS)
register("game:Minesweeper-v0", "palaestra.envs.games.minesweeper:Minesweeper", variants=_VARIANTS)
register("game:Hangman-v0", "palaestra.envs.games.hangman:Hangman", variants=_VARIANTS)
register(
    "game:Countdown-v0",
    "palaestra.envs.games.countdown:Countdown",
    variants={**_VARIANTS, "Closest": {"exact": False}},
)
register("game:WordLadder-v0", "palaestra.envs.games.word_ladder:WordLadder", variants=_VARIANTS)
register("game:Sokoban-v0", "palaestra.envs.games.sokoban:Sokoban", variants=_VARIANTS)
register("game:2048-v0", "palaestra.envs.games.game_2048:Game2048", variants=_VARIANTS)
register(
    "game:TwentyQuestions-v0",
    "palaestra.envs.games.twenty_questions:TwentyQuestions",
    variants=_VARIANTS,
)
