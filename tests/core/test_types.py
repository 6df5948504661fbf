import json

from palaestra.agents import Conversation
from palaestra.core import Episode, Turn


def _episode() -> Episode:
    return Episode(
        env_id="game:GuessTheNumber-v0",
        seed=3,
        task="guess",
        system_prompt="be brief",
        turns=[
            Turn(
                action="\\boxed{25}",
                observation="too low",
                reward=0.0,
                token_ids=[5, 6],
                logprobs=[-0.1, -0.2],
            ),
            Turn(
                action="\\boxed{37}",
                observation="correct",
                reward=1.0,
                terminated=True,
                info={"success": True},
            ),
        ],
        success=True,
    )


def test_episode_derives_rewards_and_messages():
    episode = _episode()
    assert episode.rewards == [0.0, 1.0] and episode.total_reward == 1.0
    assert episode.num_turns == 2 and episode.done
    assert [m["role"] for m in episode.messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert episode.messages[-1]["content"] == "correct"


def test_episode_round_trips_through_json():
    episode = _episode()
    restored = Episode.from_dict(json.loads(json.dumps(episode.to_dict())))
    assert restored == episode


def test_conversation_turns_become_messages_when_read_once_each():
    episode = _episode()
    opening = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "guess"}]
    turns: list[Turn] = []
    conversation = Conversation(list(opening), turns=turns)
    assert conversation.messages == opening
    assert conversation.last_observation == "guess"
    turns.append(episode.turns[0])
    assert conversation.last_observation == "too low"
    assert conversation.messages[-2:] == [
        {"role": "assistant", "content": "\\boxed{25}"},
        {"role": "user", "content": "too low"},
    ]
    turns.append(episode.turns[1])
    # Read twice: each turn is added once; the whole chat equals the episode's.
    assert conversation.messages == conversation.messages == episode.messages
