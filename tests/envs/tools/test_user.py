"""The scripted user leaks nothing it is not asked for: topics count as whole words in
questions only, at most two facts a reply, no answers to a questionnaire of every topic,
agreement to every proposal that states nothing made up (never judged against the reference
solution), natural questions and requests answered, and replies that do not depend on the
database."""

from __future__ import annotations

import pytest

import palaestra
from palaestra.envs.tools.facts import shown
from palaestra.envs.tools.user import THANKS, YES, ScriptedUser, closes
from tests.envs.tools.natural import QUESTIONS

HARD = ("tools:Shop-Hard-v0", "tools:Bank-Hard-v0", "tools:Clinic-Hard-v0")
NOT_DONE: dict[str, set[str]] = {}
"""Nothing shown to the agent (the user's replies take the message and the values shown)."""


def tasks(env_id: str, seeds=range(6)):
    env = palaestra.make(env_id)
    for seed in seeds:
        env.reset(seed=seed)
        yield env.unwrapped.task


def started(task, patience: int = 9) -> ScriptedUser:
    user = ScriptedUser(patience=patience)
    assert user.start(task) == task.request
    return user


@pytest.mark.parametrize("env_id", HARD)
def test_a_question_about_a_topic_gets_that_fact_only(env_id):
    for task in tasks(env_id):
        user = started(task)
        first, *rest = task.facts
        reply = user.respond(f"Thanks. Could you give me your {first.topics[0]}?", NOT_DONE)
        assert reply.text == first.text and not reply.stop
        assert all(fact.text not in reply.text for fact in rest)
        again = user.respond(f"Sorry, your {first.topics[0]} again?", NOT_DONE)
        assert again.text == f"As I said: {first.text}"
        assert user.respond("What is your favourite colour?", NOT_DONE).text.startswith(
            "I don't know that."
        )


@pytest.mark.parametrize("env_id", HARD)
def test_topics_in_statements_or_inside_other_words_tell_nothing(env_id):
    for task in tasks(env_id):
        user = started(task)
        for fact in task.facts:
            for topic in fact.topics:
                reply = user.respond(f"I will look into the {topic} now.", NOT_DONE)
                assert all(f.text not in reply.text for f in task.facts), topic
                inside = f"Shall we x{topic.replace(' ', '')}y?"
                assert all(f.text not in user.respond(inside, NOT_DONE).text for f in task.facts)


def test_the_issues_substring_leaks_are_closed():
    """'update your file' asks no date; 'checking your accounts' asks no account (tasks that
    hold the fact each phrase used to leak are among those tried)."""
    for env_id, message, leaked in (
        ("tools:Clinic-Hard-v0", "Should I update your file?", "date"),
        ("tools:Bank-Hard-v0", "I'm checking your accounts. One moment?", "which account"),
    ):
        holders = 0
        for task in tasks(env_id, range(8)):
            reply = started(task).respond(message, NOT_DONE)
            assert all(fact.text not in reply.text for fact in task.facts), (env_id, task.goal)
            holders += any(leaked in fact.topics for fact in task.facts)
        assert holders, f"no {env_id} task among those tried holds the fact"


@pytest.mark.parametrize("env_id", HARD)
def test_two_facts_a_reply_and_nothing_for_a_questionnaire(env_id):
    """Three topics asked at once get two facts; the issue's one questionnaire of every topic
    (which used to get every hidden fact) gets none."""
    for task in tasks(env_id, range(10)):
        user = started(task)
        asked = [fact.topics[0] for fact in task.facts[:3]]
        assert len(asked) == 3
        reply = user.respond(f"Could you tell me: {', '.join(asked)}?", NOT_DONE)
        told = [fact for fact in task.facts if fact.text in reply.text]
        assert len(told) == 2
        everything = ", ".join(group[0] for group in task.topics)
        fresh = started(task)
        reply = fresh.respond(f"Could you tell me: {everything}?", NOT_DONE)
        assert reply.text.startswith("That's a lot of questions")
        assert not any(fact.text in reply.text for fact in task.facts)


CLOSINGS = (
    "Done.", "All set!", "Anything else?", "Is there anything else I can help you with?",
    "Your order has been cancelled; the refund goes back to your card.",
    "I've booked Dr. Paula Lindqvist for you at 08:00.", "Cancelled; $12.00 is on its way.",
    "I'm sorry, I can't do that: the order is no longer pending.",
    "Unfortunately that is not possible under our policy.",
    "Your appointment is confirmed. Have a great day!",
    "Let me know if there's anything else I can do.",
)  # fmt: skip
OPEN = (
    "Hmm", "", "Let me look that up.", "I found your order; let me cancel it now.",
    "Your identity has been verified. One moment while I check the order.",
    "It is not done yet.", "Once that is done, I will send the refund.",
    "The order was placed on May 3 and it was delivered.", "Your new card ends in 1234.",
    "Is it done?",
)  # fmt: skip


def test_closing_is_read_from_the_words():
    """A report of the work done, a refusal or "anything else?" closes a message; narration,
    a plan, a statement that more is to come, or a negated "done" do not."""
    assert [m for m in CLOSINGS if not closes(m)] == []
    assert [m for m in OPEN if closes(m)] == []


@pytest.mark.parametrize("env_id", ["tools:Shop-v0", "tools:Bank-Hard-v0", "tools:Clinic-v0"])
def test_a_closing_ends_the_talk_and_anything_else_uses_patience(env_id):
    """The user thanks and stops on a closing that asks nothing it can answer (the grade is
    not its to know); a message that neither asks nor closes gets "Is it done?"; a question
    it can answer is answered even in a closing message."""
    for task in tasks(env_id):
        for message in CLOSINGS:
            reply = started(task).respond(message, NOT_DONE)
            assert (reply.text, reply.stop) == (THANKS, True), message
        for message in OPEN:
            reply = started(task).respond(message, NOT_DONE)
            assert not reply.stop and not reply.text.startswith("Thank"), message
        if task.facts:
            first = task.facts[0]
            asked = f"All done. Could you also tell me your {first.topics[0]}?"
            assert started(task).respond(asked, NOT_DONE).text == first.text


def test_proposals_are_agreed_unless_they_state_what_nobody_showed():
    """Agreement follows the user's own facts and the records the agent read, never the
    reference solution: true details of the records draw no objection, made-up values do,
    and a wrong but real order gets the same "yes" as the right one (the grade decides)."""
    env = palaestra.make("tools:Shop-Easy-v0")
    for seed in range(40):
        env.reset(seed=seed)
        task = env.unwrapped.task
        if task.actions[-1].name == "cancel_pending_order":
            break
    else:
        pytest.fail("no cancellation in 40 seeds")
    order = task.actions[-1].arguments["order_id"]
    (refund,) = task.report
    read = shown(" ".join(task.outcomes), task.vocabulary)
    user = started(task)
    agreed = f"I can cancel order {order}; {refund.text} goes back to you. Shall I proceed?"
    assert user.respond(agreed, read).text == YES
    assert user.respond(agreed, NOT_DONE).text != YES  # the refund was never shown
    other = sorted(read["id"] - {order.lstrip("#").upper()})
    assert other, "the records show another id"
    assert user.respond(f"Shall I cancel {other[0]} too?", read).text == YES
    for made_up in ("Shall I cancel order #W9999?", f"Shall I cancel {order} and refund $1.23?"):
        assert user.respond(made_up, read).text.startswith("No, that is not what I asked for.")


def test_a_yes_is_productive_and_abbreviations_end_no_sentence():
    task = next(tasks("tools:Shop-Easy-v0", [0]))
    user = ScriptedUser(patience=1)
    user.start(task)
    for _ in range(5):
        assert user.respond("Shall I proceed?", NOT_DONE).text == YES
    clinic = palaestra.make("tools:Clinic-Hard-v0")
    for seed in range(10):
        clinic.reset(seed=seed)
        task = clinic.unwrapped.task
        if any(fact.topics[0] == "name" for fact in task.facts):
            break
    reply = started(task).respond("I see Dr. Paula Lindqvist is free. What's your name?", NOT_DONE)
    assert any(fact.text == reply.text for fact in task.facts)


@pytest.mark.parametrize("env_id", HARD)
def test_natural_questions_and_requests_are_answered(env_id):
    """The phrasing set of ``natural.py`` (at least 80 questions, requests and confirmations
    the way LLM agents word them) gets the fact asked on >= 95% of tries."""
    domain = env_id.split(":")[1].split("-")[0].lower()
    assert sum(len(group) for d in QUESTIONS.values() for group in d.values()) >= 80
    tries = answered = 0
    for task in tasks(env_id, range(8)):
        for fact in task.facts:
            for question in QUESTIONS[domain][fact.topics[0]]:
                tries += 1
                answered += fact.text in started(task).respond(question, NOT_DONE).text
    assert answered >= 0.95 * tries, (answered, tries)


def test_the_user_gives_up_after_patience():
    task = next(tasks("tools:Shop-Easy-v0", [0]))
    user = ScriptedUser(patience=2)
    user.start(task)
    replies = [user.respond("Hmm.", NOT_DONE) for _ in range(3)]
    assert [r.stop for r in replies] == [False, False, True]


@pytest.mark.parametrize("env_id", HARD)
def test_every_fact_is_asked_by_one_of_the_domains_topic_groups(env_id):
    """So a questionnaire of every topic is counted as one (no fact has topics of its own)."""
    for task in tasks(env_id, range(10)):
        assert task.facts and all(fact.topics in task.topics for fact in task.facts)
