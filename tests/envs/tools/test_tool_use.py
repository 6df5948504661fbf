"""The tool-use family's shared parts, on the shop domain: the conversation, grading by final
state, the simulated users, tool errors, and the token-level trajectory of a conversation
that interleaves tool results and user replies."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import palaestra
from palaestra.agents.base import Action, Conversation
from palaestra.agents.simple import OracleAgent
from palaestra.core.tool_calls import ToolCall, format_tool_call
from palaestra.envs.tools.backend import state_hash
from palaestra.envs.tools.env import (
    MAX_MESSAGE_CHARS,
    MAX_TOOL_ERRORS,
    DomainTools,
    ToolUseEnv,
    oracle_calls,
)
from palaestra.envs.tools.shop import Shop
from palaestra.envs.tools.user import STOP, AgentUser
from palaestra.runner import Runner, make_tasks
from palaestra.tools.function import MAX_OUTPUT_CHARS


def play(env, seed=0, policy=None, options=None):
    """Play one episode (the oracle by default); the (role, text) transcript, reward, info."""
    observation, info = env.reset(seed=seed, options=options)
    policy = policy or env.oracle()
    transcript = [("user", observation)]
    while True:
        action = policy(observation)
        transcript.append(("assistant", action))
        observation, reward, terminated, truncated, info = env.step(action)
        transcript.append((info["role"], observation))
        if terminated or truncated:
            return transcript, reward, info


def run(inner, tool_calls) -> None:
    """Make ``tool_calls`` on the episode's backend, as the agent's actions would."""
    tools = {t.name: t for t in inner.backend.tools()}
    for call in tool_calls:
        output = tools[call.name].call(call.arguments)
        assert not output.startswith("error"), output


def calls(*pairs: tuple[str, dict]) -> str:
    return "\n".join(format_tool_call(ToolCall(name, args)) for name, args in pairs)


def shop(difficulty="medium", **kwargs) -> DomainTools:
    return DomainTools(ToolUseEnv("shop", difficulty=difficulty, **kwargs))


def seed_where(env, predicate, limit=200) -> int:
    """The first seed whose task satisfies ``predicate`` (tasks are drawn per seed)."""
    for seed in range(limit):
        env.reset(seed=seed)
        if predicate(env.unwrapped.task):
            return seed
    raise AssertionError("no seed found")


@pytest.mark.slow  # the default run plays the oracle on fewer seeds (test_attacks.py)
@pytest.mark.parametrize("env_id", ["tools:Shop-Easy-v0", "tools:Shop-v0", "tools:Shop-Hard-v0"])
def test_oracle_solves_100_seeded_episodes(env_id):
    env = palaestra.make(env_id)
    rewards = [play(env, seed)[1] for seed in range(100)]
    assert rewards == [1.0] * 100


def test_a_hard_conversation_interleaves_user_and_tool_turns():
    env = shop("hard")
    seed = seed_where(env, lambda task: len(task.facts) == 3)
    transcript, reward, info = play(env, seed)
    assert [role for role, _ in transcript] == [
        "user", "assistant", "user", "assistant", "user", "assistant", "tool", "assistant", "user",
    ]  # fmt: skip  # two facts per reply: two questions for three facts
    facts = [fact.text for fact in env.unwrapped.task.facts]
    replies = transcript[2][1] + transcript[4][1]
    assert all(f not in transcript[0][1] and f in replies for f in facts)
    assert reward == 1.0 and info["success"] is True
    assert info["metrics"] == {
        **info["metrics"], "database_match": 1.0, "reported": 1.0, "rules_followed": 1.0,
        "level": 3.0,
    }  # fmt: skip


def test_same_seed_same_task_and_levels_follow_difficulty():
    a, b = shop("mixed"), shop("mixed")
    for seed in range(10):
        assert a.reset(seed=seed) == b.reset(seed=seed)
        assert a.unwrapped.task == b.unwrapped.task
    for difficulty, level in (("easy", 1), ("medium", 2), ("hard", 3)):
        env = shop(difficulty)
        assert {env.reset(seed=s)[1]["level"] for s in range(10)} == {level}


# -- grading: the final database against the replay of the reference actions ----------------


def test_any_path_to_the_reference_state_passes():
    """Authenticating another way and reading in between leaves the same end state."""
    env = shop("easy")
    seed_where(env, lambda task: task.actions[-1].name == "cancel_pending_order")
    inner = env.unwrapped
    login, cancel = inner.task.actions
    user = next(u for u in inner.backend.db.users.values() if u.email == login.arguments["email"])
    tools = {t.name: t for t in inner.backend.tools()}
    tools["find_user_id_by_name_zip"].call(
        {"first_name": user.first_name, "last_name": user.last_name, "zip": user.address.zip}
    )
    tools["get_user_details"].call({"user_id": user.user_id})
    tools["get_order_details"].call({"order_id": cancel.arguments["order_id"]})
    tools[cancel.name].call(cancel.arguments)
    progress = inner.progress()
    assert progress.database_done and progress.rules_followed and not progress.reported
    (refund,) = inner.task.report  # the policy's fact: the amount refunded
    _, reward, terminated, *_ = env.step(f"Cancelled; {refund.text} is on its way back to you.")
    assert reward == 1.0 and terminated


@pytest.mark.parametrize("mistake", ["other reason", "other order", "extra side effect", "nothing"])
def test_near_miss_states_are_rejected(mistake):
    env = shop("easy")
    seed_where(
        env,
        lambda task: (
            "cancel" in task.goal
            and sum(o.status == "pending" for o in _owner_orders(env, task)) >= 2
        ),
    )
    inner = env.unwrapped
    login, cancel = inner.task.actions
    tools = {t.name: t for t in inner.backend.tools()}
    tools[login.name].call(login.arguments)
    arguments = dict(cancel.arguments)
    if mistake == "other reason":
        arguments["reason"] = next(
            r for r in ("no longer needed", "ordered by mistake") if r != arguments["reason"]
        )
    if mistake == "other order":
        arguments["order_id"] = next(
            o.order_id for o in _owner_orders(env, inner.task)
            if o.status == "pending" and o.order_id != arguments["order_id"]
        )  # fmt: skip
    if mistake != "nothing":
        assert not tools["cancel_pending_order"].call(arguments).startswith("error")
    if mistake == "extra side effect":
        other = next(
            o
            for o in _owner_orders(env, inner.task)
            if o.status == "pending" and o.order_id != arguments["order_id"]
        )
        tools["cancel_pending_order"].call(
            {"order_id": other.order_id, "reason": "no longer needed"}
        )
    assert not inner.progress().database_done
    assert inner.mismatch()  # the paths that differ, for logs
    _, reward, terminated, *_ = _talk_until_the_end(env, "All done, anything else?")
    assert reward == 0.0 and terminated


def _owner_orders(env, task):
    db = env.unwrapped.backend.db
    email = task.actions[0].arguments["email"]
    user = next(u for u in db.users.values() if u.email == email)
    return [db.orders[o] for o in user.orders]


def _talk_until_the_end(env, message):
    while True:
        result = env.step(message)
        if result[2] or result[3]:
            return result


def test_claims_without_actions_score_zero():
    """Saying every fact and 'done' without doing the work gets nothing."""
    env = shop("medium")
    seed_where(env, lambda task: any(f.kind == "amount" for f in task.report))
    report = " ".join(fact.text for fact in env.unwrapped.task.report)
    *_, reward, _, _, info = _talk_until_the_end(env, f"All done! {report}")
    assert reward == 0.0 and info["success"] is False
    assert info["metrics"]["database_match"] == 0.0 and info["metrics"]["reported"] == 1.0


def test_required_facts_must_be_told_within_the_message_cap():
    """A fact past the first :data:`MAX_MESSAGE_CHARS` characters of a message is not told:
    the user, who cannot tell a good report from a bad one, ends the conversation on the
    closing all the same, and the grade is 0; the same fact inside the cap scores 1."""
    env = shop("medium")
    seed = seed_where(env, lambda task: len(task.report) == 1 and task.report[0].kind == "amount")
    (fact,) = env.unwrapped.task.report
    for padding, won in (("x" * MAX_MESSAGE_CHARS, 0.0), ("", 1.0)):
        env.reset(seed=seed)
        inner = env.unwrapped
        run(inner, oracle_calls(inner.task))
        assert inner.progress().database_done and not inner.progress().reported
        observation, reward, terminated, *_ = env.step(f"All done. {padding} {fact.text}.")
        assert terminated and reward == won and observation.startswith("Thank you")


# -- the policy, enforced by the tools -------------------------------------------------------


def test_shop_policies_are_enforced_and_refusals_change_nothing():
    env = shop("easy")
    env.reset(seed=0)
    inner = env.unwrapped
    db = inner.backend.db
    tools = {t.name: t for t in inner.backend.tools()}
    before = db.model_dump()
    user = next(
        u for u in db.users.values() if any(db.orders[o].status == "delivered" for o in u.orders)
    )
    delivered = next(db.orders[o] for o in user.orders if db.orders[o].status == "delivered")
    item = delivered.items[0].item_id
    assert "authenticate the customer first" in tools["get_order_details"].call(
        {"order_id": delivered.order_id}
    )
    tools["find_user_id_by_email"].call({"email": user.email})
    stranger = next(o for o in db.orders.values() if o.user_id != user.user_id)
    assert "belongs to another customer" in tools["get_order_details"].call(
        {"order_id": stranger.order_id}
    )
    refusals = {
        "cancel_pending_order": {"order_id": delivered.order_id, "reason": "no longer needed"},
        "return_delivered_order_items": {"order_id": delivered.order_id, "item_ids": ["P999-01"], "payment_method_id": next(iter(user.payment_methods))},
        "exchange_delivered_order_items": {"order_id": delivered.order_id, "item_ids": [item], "new_item_ids": [item], "payment_method_id": next(iter(user.payment_methods))},
        "modify_user_address": {"user_id": "someone_else", "street": "1 A St", "city": "X", "state": "TX", "zip": "1"},
    }  # fmt: skip
    for name, arguments in refusals.items():
        assert tools[name].call(arguments).startswith(f"error: {name}:"), name
    assert db.model_dump() == before


def test_refunds_go_to_the_original_method_or_a_gift_card():
    env = shop("easy")
    env.reset(seed=0)
    db = env.unwrapped.backend.db
    tools = {t.name: t for t in env.unwrapped.backend.tools()}
    for user in db.users.values():
        cards = [m for m in user.payment_methods.values() if m.kind == "credit_card"]
        for order_id in user.orders:
            order = db.orders[order_id]
            if (
                order.status == "delivered"
                and cards
                and order.payments[0].payment_method_id != cards[0].payment_method_id
            ):
                tools["find_user_id_by_email"].call({"email": user.email})
                output = tools["return_delivered_order_items"].call(
                    {"order_id": order_id, "item_ids": [order.items[0].item_id], "payment_method_id": cards[0].payment_method_id}
                )  # fmt: skip
                assert "original payment method or a gift card" in output
                return
    pytest.fail("no order paid with a gift card by a customer with a card")


# -- bad actions never raise ----------------------------------------------------------------


def _huge_arguments(schema: dict, huge: str) -> dict:
    """Every argument of a tool's schema filled with ``huge`` text (or a list of it)."""
    properties = schema["function"]["parameters"]["properties"]
    return {
        name: [huge] if prop.get("type") == "array" else huge for name, prop in properties.items()
    }


@pytest.mark.parametrize("env_id", ["tools:Shop-v0", "tools:Bank-v0", "tools:Clinic-v0"])
def test_a_megabyte_argument_never_comes_back_whole(env_id):
    """Tools that echo an argument in their refusal (``no order '...'``) are capped like any
    observation, before and after the customer is identified."""
    env = palaestra.make(env_id)
    env.reset(seed=0)
    inner = env.unwrapped
    tools = {t.name: t for t in inner.backend.tools()}
    huge = "9" * 1_000_000
    for logged_in in (False, True):
        for action in inner.task.actions if logged_in else ():
            if action.name.startswith(("find_", "verify_")):
                tools[action.name].call(action.arguments)
        for tool in tools.values():
            observation = tool.call(_huge_arguments(tool.schema, huge))
            assert len(observation) <= MAX_OUTPUT_CHARS + 100, tool.name
    name = next(iter(tools))
    observation = env.step(calls((name, _huge_arguments(tools[name].schema, huge))))[0]
    assert len(observation) <= MAX_OUTPUT_CHARS + 100


def test_the_state_hash_does_not_depend_on_insertion_order():
    """Exchanging two items listed in either order reaches one state, with one hash."""
    db = Shop.generate(np.random.default_rng(0))
    email, order_id, old, new = _two_item_exchange(db)
    method = db.orders[order_id].payments[0].payment_method_id
    hashes = set()
    for order in (slice(None), slice(None, None, -1)):
        backend = Shop()
        backend.load(db)
        tools = {t.name: t for t in backend.tools()}
        tools["find_user_id_by_email"].call({"email": email})
        output = tools["exchange_delivered_order_items"].call(
            {"order_id": order_id, "item_ids": old[order], "new_item_ids": new[order],
             "payment_method_id": method}
        )  # fmt: skip
        assert not output.startswith("error"), output
        hashes.add(state_hash(backend.db))
    assert len(hashes) == 1


def _two_item_exchange(db):
    """(email, order id, two item ids, their in-stock other variants) of a delivered order
    paid by card (a card takes any price difference)."""
    for order in db.orders.values():
        user = db.users[order.user_id]
        paid_by_card = (
            user.payment_methods[order.payments[0].payment_method_id].kind == "credit_card"
        )
        if order.status != "delivered" or len(order.items) < 2 or not paid_by_card:
            continue
        old, new = [], []
        for item in order.items[:2]:
            variants = db.products[item.product_id].variants.values()
            other = next((v for v in variants if v.available and v.item_id != item.item_id), None)
            if other is not None:
                old.append(item.item_id)
                new.append(other.item_id)
        if len(old) == 2:
            return user.email, order.order_id, old, new
    raise AssertionError("no delivered two-item order paid by card")


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ('<tool_call>{"name": "get_order_details", "arguments": {</tool_call>', "error"),
        (calls(("drop_database", {})), "unknown tool 'drop_database'"),
        (calls(("get_order_details", {})), "missing argument 'order_id'"),
        (calls(("get_product_details", {"product_id": 7})), "argument 'product_id'"),
        (calls(*[("list_products", {})] * 100), "at most 16 tool calls per action"),
    ],
)
def test_bad_tool_calls_get_a_clear_error(action, expected):
    env = shop("easy")
    env.reset(seed=0)
    before = env.unwrapped.backend.db.model_dump()
    observation, reward, terminated, truncated, info = env.step(action)
    assert expected in observation and info["role"] == "tool"
    assert reward == 0.0 and not (terminated or truncated)
    assert env.unwrapped.backend.db.model_dump() == before


def test_garbage_messages_to_the_user_end_with_zero_within_the_budget():
    env = shop("hard")
    env.reset(seed=1)
    for turn, garbage in enumerate(["", "\x00" * 50, "🙂" * 10_000, "</tool_call>", "{}" * 3000]):  # noqa: B007
        observation, reward, terminated, _, info = env.step(garbage)
        assert isinstance(observation, str) and reward == 0.0
        if terminated:
            break
    assert terminated and turn == 3  # the scripted user gives up after `patience` idle replies
    assert info["success"] is False


# -- the scripted user -----------------------------------------------------------------------


# -- a model as the user ---------------------------------------------------------------------


class ModelUser:
    """Stands in for a served model playing the user: records what it is shown; tells the
    facts when asked and stops once the agent reports it is done."""

    def __init__(self, task):
        self.task, self.seen = task, []

    async def act(self, conversation: Conversation) -> Action:
        self.seen.append(conversation.messages)
        last = conversation.messages[-1]["content"]
        if last.startswith("All done"):
            return Action(f"Great, thanks! {STOP}")
        return Action(" ".join(fact.text for fact in self.task.facts) or "Please go on.")


def test_any_agent_can_play_the_user():
    probe = shop("hard")
    probe.reset(seed=4)
    model = ModelUser(probe.unwrapped.task)
    env = DomainTools(ToolUseEnv("shop", difficulty="hard", user=AgentUser(model)))

    async def episode():
        observation, _ = await env.areset(seed=4)
        policy = env.oracle()
        while True:
            observation, reward, terminated, truncated, info = await env.astep(policy(observation))
            if terminated or truncated:
                return reward, info

    reward, info = asyncio.run(episode())
    assert reward == 1.0 and info["success"]
    system, *conversation = model.seen[-1]
    assert system["role"] == "system" and probe.unwrapped.task.facts[0].text in system["content"]
    assert STOP in system["content"]
    # the support agent's messages are the model-user's 'user' turns, its own the 'assistant' ones
    last = conversation[-1]
    assert last["role"] == "user" and last["content"].startswith("All done.")
    assert all(fact.text in last["content"] for fact in probe.unwrapped.task.report)
    assert conversation[2]["role"] == "user" and conversation[2]["content"].startswith("I can help")


def test_an_agent_spec_builds_a_model_user():
    env = ToolUseEnv("shop", user="openai:some-model@http://127.0.0.1:9/v1")
    assert isinstance(env.user, AgentUser)
    with pytest.raises(ValueError, match="unknown domain 'mall'"):
        ToolUseEnv("mall")


# -- trajectories ----------------------------------------------------------------------------


def test_user_turns_and_tool_results_are_masked_from_the_loss(qwen25_tokenizer):
    oracle = OracleAgent()

    class TokenOracle:
        tokenizer = qwen25_tokenizer

        def act(self, conversation: Conversation) -> Action:
            text = oracle.act(conversation).text
            ids = qwen25_tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)
            return Action(text, ids, [-0.5] * len(ids), "stop")

    probe = palaestra.make("tools:Shop-Hard-v0")
    probe.reset(seed=0)
    task = probe.unwrapped.task
    questions = ["assistant", "user"] * -(-len(task.facts) // 2)  # two facts per reply
    (episode,) = Runner(TokenOracle()).run(make_tasks(["tools:Shop-Hard-v0"], [0]))
    assert episode.success
    roles = [m["role"] for m in episode.messages]
    tools = ["tool"] * len(oracle_calls(task))
    assert roles == ["system", "user", *questions, "assistant", *tools, "assistant", "user"]
    trained = [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if m]
    assert trained == [t for turn in episode.turns for t in turn.token_ids]
    text = qwen25_tokenizer.decode(episode.token_ids)
    masked = qwen25_tokenizer.decode(
        [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if not m]
    )
    for message in episode.messages[3:-1]:  # the closing reply needs no tokens
        if message["role"] in ("user", "tool"):
            assert message["content"] in masked and message["content"] in text
    assert "<tool_response>" in masked


def test_eval_with_the_oracle_is_perfect():
    from palaestra.evaluation.run import EvalConfig, evaluate

    result = evaluate(OracleAgent(), EvalConfig(["tools:Shop*"], episodes=20))
    assert sorted(s.env_id for s in result.summaries) == [
        "tools:Shop-Easy-v0", "tools:Shop-Hard-v0", "tools:Shop-v0",
    ]  # fmt: skip
    assert all(s.success_rate == 1.0 and s.errors == 0 for s in result.summaries)


def test_more_failed_tool_calls_than_the_limit_end_the_episode_with_zero():
    """tau2-bench's error limit: ten failed calls are allowed, the eleventh ends the episode."""
    env = palaestra.make("tools:Shop-v0")
    env.reset(seed=0)
    assert env.max_errors == MAX_TOOL_ERRORS == 10
    bad = format_tool_call(ToolCall("get_order_details", {"order_id": "#nope"}))
    _, reward, terminated, _, info = env.step(bad * 10)
    assert not terminated and info["role"] == "tool"
    observation, reward, terminated, truncated, info = env.step(bad)
    assert terminated and not truncated and reward == 0.0
    assert info["metrics"]["tool_errors"] == 11.0 and "11 tool calls failed" in observation
    env.reset(seed=0)
    assert not env.step(bad * 10)[2]  # the count starts again each episode
