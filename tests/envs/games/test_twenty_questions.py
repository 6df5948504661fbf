"""Twenty questions: the knowledge base, question and guess parsing, the oracle, shaping."""

from __future__ import annotations

import itertools
import json
from importlib import resources

import numpy as np
import pytest

from palaestra.envs.games.twenty_questions import TwentyQuestions
from palaestra.envs.games.twenty_questions_kb import (
    NO,
    UNKNOWN,
    YES,
    load_knowledge_base,
    parse_knowledge_base,
)
from palaestra.testing import play

KB = load_knowledge_base()
COLUMN = {attribute.name: i for i, attribute in enumerate(KB.attributes)}


def _raw() -> dict:
    path = resources.files("palaestra.envs.games").joinpath("data", "twenty_questions.json")
    return json.loads(path.read_text("utf-8"))


def _value(entity: str, attribute: str) -> int:
    row = next(i for i, e in enumerate(KB.entities) if e.name == entity)
    return int(KB.values[row, COLUMN[attribute]])


def test_knowledge_base_size_and_categories():
    assert len(KB.entities) >= 300
    assert 30 <= len(KB.attributes) <= 60
    sizes = {c: len(KB.category_members(c)) for c in KB.categories}
    assert min(sizes.values()) >= 10, sizes


def test_every_entity_is_told_apart_by_a_known_answer():
    known_yes, known_no = KB.values == YES, KB.values == NO
    for a, b in itertools.combinations(range(len(KB.entities)), 2):
        differ = (known_yes[a] & known_no[b]) | (known_no[a] & known_yes[b])
        assert differ.any(), (KB.entities[a].name, KB.entities[b].name)


@pytest.mark.parametrize(
    ("if_yes", "then", "value"),
    [
        ("is_animal", "is_alive", YES),
        ("is_plant", "is_alive", YES),
        ("is_alive", "is_man_made", NO),
        ("is_mammal", "is_animal", YES),
        ("is_bird", "is_animal", YES),
        ("is_bird", "has_wings", YES),
        ("is_fish", "found_in_or_on_water", YES),
        ("is_reptile", "is_animal", YES),
        ("is_insect", "is_animal", YES),
        ("is_pet", "is_animal", YES),
        ("is_farm_animal", "is_animal", YES),
        ("is_fruit", "is_food_or_drink", YES),
        ("is_vegetable", "is_food_or_drink", YES),
        ("is_drink", "is_food_or_drink", YES),
        ("contains_meat", "is_food_or_drink", YES),
        ("is_building", "is_place", YES),
        ("is_place", "bigger_than_a_person", YES),
        ("bigger_than_a_person", "fits_in_one_hand", NO),
        ("is_vehicle", "is_man_made", YES),
        ("is_worn", "is_man_made", YES),
        ("has_engine_or_motor", "is_man_made", YES),
        ("uses_electricity", "is_man_made", YES),
    ],
)
def test_answers_are_consistent(if_yes, then, value):
    rows = KB.values[:, COLUMN[if_yes]] == YES
    wrong = [KB.entities[i].name for i in np.where(rows & (KB.values[:, COLUMN[then]] != value))[0]]
    assert not wrong, f"{if_yes} but not {then}: {wrong}"


def test_no_four_legged_birds_fish_or_insects():
    legs = KB.values[:, COLUMN["has_four_legs"]] == YES
    for kind in ("is_bird", "is_fish", "is_insect"):
        assert not (legs & (KB.values[:, COLUMN[kind]] == YES)).any()


@pytest.mark.parametrize(
    ("entity", "attribute", "value"),
    [
        ("dog", "is_mammal", YES),
        ("penguin", "can_fly", NO),
        ("penguin", "is_bird", YES),
        ("bat", "can_fly", YES),
        ("whale", "is_fish", NO),
        ("whale", "found_in_or_on_water", YES),
        ("airplane", "can_fly", YES),
        ("apple", "is_fruit", YES),
        ("carrot", "is_vegetable", YES),
        ("milk", "is_drink", YES),
        ("hammer", "made_of_metal", YES),
        ("sun", "is_hot", YES),
        ("snake", "has_four_legs", NO),
        ("knife", "is_sharp", YES),
        ("car", "has_wheels", YES),
        ("cat", "is_pet", YES),
        ("cow", "is_farm_animal", YES),
        ("dog", "is_brown", UNKNOWN),
    ],
)
def test_spot_checked_facts(entity, attribute, value):
    assert _value(entity, attribute) == value


def test_values_match_the_data_file():
    for item in _raw()["entities"]:
        row = next(i for i, e in enumerate(KB.entities) if e.name == item["name"])
        expected = np.full(len(KB.attributes), NO)
        expected[[COLUMN[a] for a in item["yes"]]] = YES
        expected[[COLUMN[a] for a in item["unknown"]]] = UNKNOWN
        assert KB.values[row].tolist() == expected.tolist(), item["name"]


def test_guesses_never_read_as_questions():
    for entity in KB.entities:
        for name in (entity.name, *entity.aliases):
            assert KB.question_index(name) is None, name
            assert KB.question_index(f"Is it a {name}?") is None, name
            assert KB.entity_index_of_guess(f"Is it a {name}?") == KB.entities.index(entity)
            assert KB.entity_index_of_guess(name.upper()) == KB.entities.index(entity)


def test_loading_rejects_unknown_attributes_and_clashing_names():
    data = _raw()
    data["entities"][0]["yes"].append("has_gills")
    with pytest.raises(ValueError, match="unknown attribute 'has_gills'"):
        parse_knowledge_base(data)
    data = _raw()
    data["entities"][1]["aliases"].append(data["entities"][0]["name"])
    with pytest.raises(ValueError, match="entity name"):
        parse_knowledge_base(data)
    data = _raw()
    data["attributes"][1]["phrasings"].append(data["attributes"][0]["question"])
    with pytest.raises(ValueError, match="question"):
        parse_knowledge_base(data)


def test_env_answers_every_phrasing_from_the_knowledge_base():
    env = TwentyQuestions("hard", max_turns=1000)
    for seed in range(25):
        env.reset(seed=seed)
        row = next(i for i, e in enumerate(KB.entities) if e.name == env.secret)
        for column, attribute in enumerate(KB.attributes):
            expected = {YES: "Yes.", NO: "No.", UNKNOWN: "I don't know"}[
                int(KB.values[row, column])
            ]
            for text in (attribute.question, *attribute.phrasings):
                observation, reward, terminated, *_ = env.step("\\boxed{" + text + "}")
                assert observation.startswith(f"{attribute.question} {expected}"), (
                    text,
                    env.secret,
                )
                assert reward == 0.0 and not terminated


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_oracle_wins_every_seed_within_the_turn_limit(difficulty):
    env = TwentyQuestions(difficulty)
    for seed in range(100):
        transcript = play(env, seed)
        assert transcript[-1][5] is True and transcript[-1][2] == 1.0, seed
        assert len(transcript) - 1 <= env.max_turns


def test_same_seed_same_secret_and_seeds_differ():
    a, b = TwentyQuestions("hard"), TwentyQuestions("hard")
    secrets = []
    for seed in range(40):
        assert a.reset(seed=seed) == b.reset(seed=seed)
        assert a.secret == b.secret
        secrets.append(a.secret)
    assert len(set(secrets)) > 30


def test_easy_names_the_category_and_lists_its_members():
    env = TwentyQuestions("easy")
    observation, _ = env.reset(seed=2)
    secret = next(e for e in KB.entities if e.name == env.secret)
    assert f"I am thinking of {KB.categories[secret.category]}." in observation
    members = {KB.entities[i].name for i in KB.category_members(secret.category)}
    assert set(env.candidates()) == members and env.secret in members
    assert "Is it alive?" in observation
    hard_observation, _ = TwentyQuestions("hard").reset(seed=2)
    assert "It is one of these" not in hard_observation
    assert "It is one of these" in TwentyQuestions("medium").reset(seed=2)[0]


def test_questions_narrow_the_candidates_and_keep_the_secret():
    env = TwentyQuestions("hard", max_turns=60)
    rng = np.random.default_rng(0)
    for seed in range(20):
        env.reset(seed=seed)
        done = False
        while not done:
            before = set(env.candidates())
            *_, done, _, _ = env.step(env.random_action(rng))
            if not done:
                assert env.secret in env.candidates() and set(env.candidates()) <= before


def test_bad_questions_and_wrong_guesses_cost_a_turn():
    env = TwentyQuestions("hard", max_turns=6)
    env.reset(seed=0)
    wrong = next(e.name for e in KB.entities if e.name != env.secret)
    observation, reward, *_ = env.step("\\boxed{Is it a rodent?}")
    assert '"rodent" is neither one of my questions' in observation and "Can it fly?" in observation
    assert reward == 0.0
    observation, *_ = env.step("x" * 500)
    assert "could not read" in observation
    observation, *_ = env.step(f"\\boxed{{Is it a {wrong}?}}")
    assert observation.startswith(f"No, it is not the {wrong}.")
    assert wrong not in env.candidates()
    first = env.step("Can it fly?")[0]
    assert env.step("\\boxed{Does it fly?}")[0].split(".")[0] == first.split(".")[0]
    observation, reward, terminated, _, info = env.step("")
    assert terminated and info["success"] is False and reward == 0.0
    assert f"it was the {env.secret}" in observation
    assert info["metrics"]["turns"] == 6.0


def test_guessing_right_wins_in_any_spelling():
    for spelling in ("\\boxed{{{}}}", "Is it a {}?", "\\boxed{{it is an {}}}", "{}"):
        env = TwentyQuestions("hard")
        env.reset(seed=5)
        _, reward, terminated, _, info = env.step(spelling.format(env.secret.upper()))
        assert terminated and info["success"] and reward == 1.0, spelling


def test_shaping_sums_to_its_weight_over_any_win():
    env = TwentyQuestions("medium", shaping=0.5, max_turns=60)
    rng = np.random.default_rng(0)
    for seed in range(15):
        env.reset(seed=seed)
        oracle, total, done, turn = env.oracle(), 0.0, False, 0
        while not done:
            action = env.random_action(rng) if turn < 4 else oracle("")
            _, reward, done, _, info = env.step(action)
            assert 0.0 <= reward <= 1.5
            total, turn = total + reward, turn + 1
        assert info["success"] and total == pytest.approx(1.5)
