"""Tool use: support conversations over stateful backends with a simulated user (``tools:*``).

``tools:Shop-v0`` (orders, returns, exchanges), ``tools:Bank-v0`` (accounts, cards,
transfers, disputes) and ``tools:Clinic-v0`` (appointments, doctors, patients): the agent
reads the domain's policy, calls its tools (which enforce the policy) and talks to a
simulated user; the reward is 1 when the final database equals the reference actions'
replay, the facts the policy says to tell were told (nothing made up), and the action checks
hold. Each episode's database is drawn from the reset seed; about a fifth of the requests
are ones the policy refuses. Variants: ``-Easy`` (one action), medium (several dependent
actions), ``-Hard`` (needs what only the user knows).
"""

from palaestra.core.registry import WrapperSpec, register

TOOLS = WrapperSpec("palaestra.envs.tools.env:DomainTools", {})

for _domain, _what in (
    ("Shop", "an online shop's orders, returns, exchanges and addresses"),
    ("Bank", "a bank's accounts, cards, transfers and disputes"),
    ("Clinic", "a clinic's appointments, doctors and patients"),
):
    register(
        f"tools:{_domain}-v0",
        "palaestra.envs.tools.env:ToolUseEnv",
        kwargs={"domain": _domain.lower()},
        wrappers=[TOOLS],
        description=f"Customer support over {_what}, with a simulated user; reward 1 when the "
        "final database equals the reference actions' replay, the required facts were told "
        "and the action checks hold.",
        variants={"Easy": {"difficulty": "easy"}, "Hard": {"difficulty": "hard"}},
    )
