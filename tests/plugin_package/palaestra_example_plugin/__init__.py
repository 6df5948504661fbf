"""An env package outside palaestra: one echo env, registered through an entry point."""

from palaestra import Env, register

TOPICS = ("the sea", "mountains", "bread", "trains", "music", "rain", "chess", "bees")


class Echo(Env):
    """Say something about a topic; the env repeats it back with reward 1."""

    max_turns = 1

    def __init__(self, loud: bool = False, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        self.loud = loud

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        topic = TOPICS[int(self.np_random.integers(len(TOPICS)))]
        return f"Say something about {topic}.", {"role": "user"}

    def step(self, action):
        text = action.upper() if self.loud else action
        return text, 1.0, True, False, {"role": "user", "success": True}


def register_envs() -> None:
    register("plugin:Echo-v0", Echo, variants={"Loud": {"loud": True}})
