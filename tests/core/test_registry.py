import gymnasium as gym
import pytest

import palaestra
from palaestra.core import Env, deregister, gymnasium_id, register
from palaestra.envs.games.guess_the_number import GuessTheNumber


def test_make_applies_registered_and_call_kwargs():
    assert palaestra.make("game:GuessTheNumber-Hard-v0").max_number == 1000
    env = palaestra.make("game:GuessTheNumber-Hard-v0", max_number=64)
    assert (env.max_number, env.max_turns) == (64, 12)


def test_variants_are_registered_with_their_kwargs():
    assert dict(palaestra.spec("game:Wordle-Easy-v0").kwargs) == {"difficulty": "easy"}
    assert palaestra.spec("game:Wordle-v0").kwargs == {}
    assert palaestra.list_envs("game:Wordle*") == [
        "game:Wordle-Easy-v0",
        "game:Wordle-Hard-v0",
        "game:Wordle-v0",
    ]


def test_spec_parts():
    spec = palaestra.spec("game:TicTacToe-Hard-v0")
    assert (spec.family, spec.name, spec.version) == ("game", "TicTacToe-Hard", 0)
    assert "Tic-tac-toe" in spec.summary()


@pytest.mark.parametrize(
    ("bad_id", "suggestion"),
    [
        ("game:Wordl-v0", "game:Wordle-v0"),
        ("game:wordle-v0", "game:Wordle-v0"),
        ("game:Wordle-v1", "game:Wordle-v0"),
        ("GuessTheNumber", "game:GuessTheNumber-v0"),
    ],
)
def test_unknown_id_suggests_near_misses(bad_id, suggestion):
    with pytest.raises(palaestra.UnknownEnvError) as excinfo:
        palaestra.make(bad_id)
    message = str(excinfo.value)
    assert f"unknown env id {bad_id!r}" in message
    assert f"did you mean {suggestion!r}" in message


def test_unknown_id_without_near_miss_explains_the_format():
    with pytest.raises(palaestra.UnknownEnvError, match="ids look like 'family:Name-vN'"):
        palaestra.make("zzzzzzzz")


@pytest.mark.parametrize("bad_id", ["Wordle-v0", "game:Wordle", "Game:Wordle-v0", "game:-v0"])
def test_register_rejects_malformed_ids(bad_id):
    with pytest.raises(ValueError, match="invalid env id"):
        register(bad_id, GuessTheNumber)


def test_register_refuses_duplicates_unless_override():
    register("test:Guess-v0", GuessTheNumber, kwargs={"max_number": 5})
    try:
        with pytest.raises(ValueError, match="already registered"):
            register("test:Guess-v0", GuessTheNumber)
        register("test:Guess-v0", GuessTheNumber, kwargs={"max_number": 7}, override=True)
        assert palaestra.make("test:Guess-v0").max_number == 7
    finally:
        deregister("test:Guess-v0")
    assert "test:Guess-v0" not in palaestra.list_envs()


def test_entry_point_must_return_a_palaestra_env():
    register("test:NotAnEnv-v0", lambda: object())
    try:
        with pytest.raises(TypeError, match="not a palaestra Env"):
            palaestra.make("test:NotAnEnv-v0")
    finally:
        deregister("test:NotAnEnv-v0")


def test_gymnasium_bridge_makes_the_same_env():
    assert gymnasium_id("game:Wordle-Hard-v0") == "palaestra/game-Wordle-Hard-v0"
    env = gym.make("palaestra/game-GuessTheNumber-Easy-v0")
    assert isinstance(env.unwrapped, Env)
    assert env.unwrapped.max_number == 20
    direct = palaestra.make("game:GuessTheNumber-Easy-v0")
    assert env.reset(seed=3)[0] == direct.reset(seed=3)[0]
    assert env.step("\\boxed{10}")[0] == direct.step("\\boxed{10}")[0]


def test_gymnasium_make_forwards_kwargs_and_module_prefix():
    env = gym.make("palaestra:palaestra/game-GuessTheNumber-v0", max_number=8)
    assert env.unwrapped.max_number == 8
    assert env.unwrapped.spec.kwargs["max_number"] == 8
