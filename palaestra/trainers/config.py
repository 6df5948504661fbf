"""Typed trainer configuration, loadable from YAML or built in Python.

>>> config = TrainerConfig(advantage={"estimator": "grpo"}, rollout={"group_size": 8})
>>> config.loss.policy_loss
'ppo_clip'

Unknown keys are errors (a typo must not silently fall back to a default).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from palaestra.agents.devices import DEVICE_PATTERN
from palaestra.trainers.advantages import DISCOUNTED_ESTIMATORS, GROUPED_ESTIMATORS


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AdvantageConfig(_Section):
    """Advantage estimator (see :mod:`palaestra.trainers.advantages`)."""

    estimator: Literal["reinforce", "rebn", "grpo", "drgrpo", "rloo", "turn_grpo"] = "rebn"
    gamma: float = Field(1.0, ge=0.0, le=1.0, description="discount over turns")
    eps: float = Field(1e-6, gt=0.0, description="added to the std before dividing")


class LossConfig(_Section):
    """Policy loss, regularizers and aggregation (see :mod:`palaestra.trainers.losses`)."""

    policy_loss: Literal["pg", "ppo_clip", "clip_cov", "kl_cov"] = "ppo_clip"
    eps_low: float = Field(0.2, ge=0.0, lt=1.0)
    eps_high: float = Field(0.2, ge=0.0, description="> eps_low is clip-higher (DAPO)")
    dual_clip: float | None = Field(
        None, gt=1.0, description="dual-clip PPO: no gradient for A < 0 once the ratio exceeds it"
    )
    cov_ratio: float = Field(2e-4, ge=0.0, le=1.0, description="token fraction for Clip/KL-Cov")
    clip_cov_lb: float = 1.0
    clip_cov_ub: float = 5.0
    kl_cov_coef: float = Field(1.0, ge=0.0)
    kl_coef: float = Field(0.0, ge=0.0, description="weight of KL to the reference policy")
    kl_estimator: Literal["k2", "k3"] = Field(
        "k2", description="k2: gradient of KL(pi||ref); k3 (verl, TRL): of KL(ref||pi)"
    )
    entropy_coef: float = Field(0.0, ge=0.0)
    aggregation: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"] = Field(
        "token-mean", description="the trainer config picks seq-mean-token-sum for drgrpo"
    )
    decoupled: bool | None = Field(
        None,
        description="decoupled PPO: clip against the learner's policy at the start of the "
        "update and importance-weight the rollout policy (AReaL); null: on in async mode",
    )
    behav_weight_cap: float = Field(
        5.0, gt=1.0, description="decoupled PPO leaves out tokens with pi_prox/pi_behav above this"
    )

    @field_validator("kl_estimator", mode="before")
    @classmethod
    def _refuse_k1(cls, value: Any) -> Any:
        if value == "k1":
            raise ValueError(
                "k1 as a loss adds gradient noise even where the policy equals the reference "
                "(its gradient is grad logp); use k2 (the gradient of KL(pi || ref)) or k3"
            )
        return value

    @model_validator(mode="after")
    def _check_cov_bounds(self) -> LossConfig:
        if self.clip_cov_lb > self.clip_cov_ub:
            raise ValueError(
                f"clip_cov_lb ({self.clip_cov_lb}) must not exceed clip_cov_ub ({self.clip_cov_ub})"
            )
        return self


class FilterConfig(_Section):
    """Batch filters (see :mod:`palaestra.trainers.filters`)."""

    drop_uniform_groups: bool = Field(
        False, description="drop groups whose advantages (under the estimator in use) are all 0"
    )
    accuracy_band: tuple[float, float] | None = Field(
        None, description="keep groups whose success rate lies in [low, high]"
    )
    max_tokens: int | None = Field(None, gt=0, description="token budget per episode")
    truncated_reward: float | None = Field(
        0.0, description="return of an over-budget episode; null keeps its rewards"
    )

    @model_validator(mode="after")
    def _check_band(self) -> FilterConfig:
        if self.accuracy_band is not None:
            low, high = self.accuracy_band
            if not 0.0 <= low <= high <= 1.0:
                raise ValueError(f"accuracy_band needs 0 <= low <= high <= 1, got {low, high}")
        return self


class OptimConfig(_Section):
    """AdamW with a warmup + decay schedule and gradient clipping."""

    lr: float = Field(1e-5, gt=0.0)
    weight_decay: float = Field(0.0, ge=0.0)
    betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = Field(1e-8, gt=0.0)
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0)
    total_steps: int | None = Field(
        None, gt=0, description="decay horizon of linear/cosine schedules"
    )
    max_grad_norm: float | None = Field(1.0, gt=0.0, description="null disables clipping")

    @model_validator(mode="after")
    def _check_horizon(self) -> OptimConfig:
        if self.schedule != "constant" and self.total_steps is None:
            raise ValueError(f"schedule {self.schedule!r} needs optim.total_steps (its horizon)")
        return self


class UpdateConfig(_Section):
    """How one batch of episodes turns into optimizer steps."""

    micro_batch_size: int = Field(8, gt=0, description="sequences per forward/backward pass")
    mini_batches: int = Field(1, gt=0, description="optimizer steps per pass over the batch")
    epochs: int = Field(1, gt=0, description="passes over the batch (PPO epochs)")
    train_on_env_tokens: bool = Field(
        False, description="also train on observation/tool tokens (off: policy tokens only)"
    )
    temperature: float = Field(
        1.0, gt=0.0, description="sampling temperature of the rollouts; logits are divided by it"
    )


class LoraConfig(_Section):
    """LoRA adapters via ``peft``."""

    r: int = Field(16, gt=0)
    alpha: int = Field(32, gt=0)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )


class ModelConfig(_Section):
    """The policy model, and where it trains (see :mod:`palaestra.trainers.placement`)."""

    path: str | None = Field(None, description="local path or id of a causal LM")
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    device: str = Field(
        "auto",
        description="auto (the GPU when there is one), cpu, cuda or cuda:N: where the policy, "
        "the reference model and the HF engine run",
    )
    lora: LoraConfig | None = None
    gradient_checkpointing: bool | None = Field(
        None,
        description="recompute activations in the backward pass (less memory, about a third "
        "more update time); null: on when model.device is a GPU",
    )

    @field_validator("device")
    @classmethod
    def _check_device(cls, value: str) -> str:
        if not re.fullmatch(DEVICE_PATTERN, value):
            raise ValueError(f"model.device must be auto, cpu, cuda or cuda:N; got {value!r}")
        return value


class VLLMConfig(_Section):
    """The vLLM rollout engine (``rollout.engine: vllm``): options of vLLM's engine in this
    process, or a separate ``vllm serve`` to use instead (``server_url``).

    >>> VLLMConfig(enforce_eager=True).engine_kwargs("bfloat16")["dtype"]
    'bfloat16'
    """

    gpu_memory_utilization: float = Field(
        0.3,
        gt=0.0,
        le=1.0,
        description="share of the GPU's memory vLLM reserves (weights + KV cache; on CPU: of "
        "RAM); the trainer's policy and optimizer need the rest when they share the device",
    )
    enforce_eager: bool = Field(
        False, description="no CUDA graphs or compilation: starts in seconds, decodes slower"
    )
    dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        None, description="weights and activations; null: the policy's dtype (model.dtype)"
    )
    max_model_len: int | None = Field(
        None, gt=0, description="longest sequence (prompt + every turn); null: the model's"
    )
    tensor_parallel_size: int = Field(1, gt=0, description="GPUs one engine spans")
    server_url: str | None = Field(
        None,
        description="root URL of a separate `vllm serve` to generate with and push to (started "
        "with palaestra.agents.vllm.serve_command); the options above are then the server's",
    )
    served_model_name: str | None = Field(
        None, description="the server's model name; null: model.path"
    )
    weights_dir: str | None = Field(
        None,
        description="where a push to the server writes the weights file; the server must read "
        "it (same host or shared filesystem); null: shared memory",
    )

    def engine_kwargs(self, model_dtype: str) -> dict[str, Any]:
        """Keyword arguments of vLLM's ``AsyncEngineArgs``."""
        kwargs: dict[str, Any] = {
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "enforce_eager": self.enforce_eager,
            "dtype": self.dtype or model_dtype,
            "tensor_parallel_size": self.tensor_parallel_size,
        }
        if self.max_model_len is not None:
            kwargs["max_model_len"] = self.max_model_len
        return kwargs


class RolloutConfig(_Section):
    """What the runner collects each step."""

    env_id: str = "game:GuessTheNumber-v0"
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="passed to make(env_id)")
    first_seed: int = Field(0, ge=0, description="training tasks use seeds first_seed, +1, ...")
    order: Literal["seeds", "epochs"] = Field(
        "seeds",
        description="seeds: task i uses seed first_seed + i; epochs: every row of a dataset "
        "env once per epoch, shuffled per epoch from the run's seed",
    )
    group_size: int = Field(8, gt=0, description="episodes per task (same env id and seed)")
    groups_per_step: int = Field(8, gt=0)
    max_new_tokens: int = Field(256, gt=0, description="per turn")
    max_turns: int | None = Field(None, gt=0, description="turn cap (default: the env's own)")
    concurrency: int = Field(32, gt=0, description="episodes in flight at once")
    engine: Literal["hf", "vllm"] = "hf"
    vllm: VLLMConfig = VLLMConfig()
    max_staleness: int = Field(
        0, ge=0, description="policy versions a rollout may lag behind (0 = synchronous)"
    )
    env_server: str | None = Field(
        None,
        description="URL of a `palaestra serve` server hosting the envs "
        "(token: $PALAESTRA_ENV_SERVER_TOKEN)",
    )

    @model_validator(mode="after")
    def _vllm_options_need_vllm(self) -> RolloutConfig:
        # a dumped config carries the default section whatever the engine
        if self.engine != "vllm" and self.vllm != VLLMConfig():
            raise ValueError("rollout.vllm configures the vllm engine; set rollout.engine: vllm")
        return self


class LogConfig(_Section):
    """Where metrics go besides ``metrics.jsonl`` in the output directory."""

    console: bool = Field(True, description="a rich line per step")
    tensorboard: bool = Field(False, description="needs the tensorboard package")
    wandb_project: str | None = Field(None, description="log to W&B (needs wandb)")


class TrainerConfig(_Section):
    """Everything a training run needs; ``TrainerConfig.from_yaml(path)`` reads a file."""

    seed: int = 0
    steps: int = Field(100, gt=0)
    output_dir: str = "runs/default"
    eval_every: int = Field(0, ge=0, description="0 disables periodic eval")
    eval_episodes: int = Field(32, gt=0, description="held-out tasks per eval")
    eval_first_seed: int = Field(
        1_000_000, ge=0, description="eval tasks use seeds from here on (held out of training)"
    )
    eval_rows: tuple[int, int] | None = Field(
        None,
        description="held-out eval on rows [start, end) of the training source (needs "
        "rollout.order: epochs, which leaves them out of training)",
    )
    eval_env_kwargs: dict[str, Any] | None = Field(
        None, description="make(env_id, **kwargs) for eval, e.g. another split's path"
    )
    save_every: int = Field(0, ge=0, description="0 saves only at the end")
    model: ModelConfig = ModelConfig()
    rollout: RolloutConfig = RolloutConfig()
    advantage: AdvantageConfig = AdvantageConfig()
    loss: LossConfig = LossConfig()
    filters: FilterConfig = FilterConfig()
    optim: OptimConfig = OptimConfig()
    update: UpdateConfig = UpdateConfig()
    log: LogConfig = LogConfig()

    @model_validator(mode="before")
    @classmethod
    def _drgrpo_aggregation(cls, data: Any) -> Any:
        """Dr. GRPO is its estimator plus no length normalization: unless the loss names an
        aggregation, ``drgrpo`` gets ``seq-mean-token-sum``."""
        if not isinstance(data, dict) or _get(data.get("advantage"), "estimator") != "drgrpo":
            return data
        loss = data.get("loss")
        if isinstance(loss, LossConfig):
            if "aggregation" not in loss.model_fields_set:
                loss = loss.model_copy(update={"aggregation": "seq-mean-token-sum"})
        else:
            loss = {"aggregation": "seq-mean-token-sum", **(loss or {})}
        return {**data, "loss": loss}

    @model_validator(mode="after")
    def _check_advantage(self) -> TrainerConfig:
        estimator = self.advantage.estimator
        if estimator in GROUPED_ESTIMATORS and self.rollout.group_size < 2:
            raise ValueError(
                f"estimator {estimator!r} compares episodes of one task; "
                "set rollout.group_size >= 2"
            )
        if estimator not in DISCOUNTED_ESTIMATORS and self.advantage.gamma != 1.0:
            raise ValueError(
                f"estimator {estimator!r} uses the plain sum of an episode's rewards, so "
                f"advantage.gamma ({self.advantage.gamma}) would have no effect; set it to 1 or "
                f"use {', '.join(sorted(DISCOUNTED_ESTIMATORS))}"
            )
        if self.filters.drop_uniform_groups and estimator not in GROUPED_ESTIMATORS:
            raise ValueError(
                "filters.drop_uniform_groups drops groups whose group-relative advantages are "
                f"all 0; estimator {estimator!r} is not group-relative (use one of "
                f"{', '.join(sorted(GROUPED_ESTIMATORS))})"
            )
        if estimator == "drgrpo" and self.loss.aggregation != "seq-mean-token-sum":
            warnings.warn(
                f"drgrpo with loss.aggregation {self.loss.aggregation!r} is not Dr. GRPO, "
                "which does not normalize by length (seq-mean-token-sum)",
                stacklevel=2,
            )
        return self

    @property
    def decoupled(self) -> bool:
        """Whether the update uses decoupled PPO: ``loss.decoupled``, or by default whether
        rollouts may be stale (``rollout.max_staleness > 0``)."""
        if self.loss.decoupled is not None:
            return self.loss.decoupled
        return self.rollout.max_staleness > 0

    @model_validator(mode="after")
    def _check_held_out(self) -> TrainerConfig:
        if self.eval_rows is not None:
            start, end = self.eval_rows
            if not 0 <= start < end:
                raise ValueError(f"eval_rows needs 0 <= start < end, got {self.eval_rows}")
            if self.rollout.order != "epochs":
                raise ValueError(
                    "eval_rows holds rows of the training source out; set rollout.order: "
                    "epochs so that training walks the other rows"
                )
            return self
        if self.rollout.order == "epochs" or self.eval_env_kwargs is not None:
            return self  # rows by index, or another source: seeds cannot overlap
        first, end = self.rollout.first_seed, self.rollout.first_seed
        end += self.steps * self.rollout.groups_per_step
        eval_end = self.eval_first_seed + self.eval_episodes
        if self.eval_every and first < eval_end and self.eval_first_seed < end:
            raise ValueError(
                f"training seeds [{first}, {end}) overlap the eval seeds "
                f"[{self.eval_first_seed}, {eval_end}); raise eval_first_seed to >= {end}"
            )
        return self

    @classmethod
    def from_yaml(cls, path: str | Path) -> TrainerConfig:
        """Load a config from a YAML file; every key is optional, unknown keys are errors."""
        yaml = _import_yaml()
        text = Path(path).read_text(encoding="utf-8")
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as error:
            raise ValueError(f"{path} is not valid YAML: {_yaml_problem(error)}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a trainer config must be a YAML mapping at the top level")
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise ValueError(
                f"invalid trainer config {path}: {validation_problems(error)}"
            ) from None

    def to_yaml(self, path: str | Path | None = None) -> str:
        """The config as YAML text; also written to ``path`` when given."""
        yaml = _import_yaml()
        text = yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text


def _get(section: Any, key: str) -> Any:
    """``key`` of a config section given as a dict or as a model."""
    return section.get(key) if isinstance(section, dict) else getattr(section, key, None)


def validation_problems(error: ValidationError) -> str:
    """Every problem of a config in one line: ``where: what`` (value shown), joined by ``; ``.

    >>> try:
    ...     TrainerConfig.model_validate({"model": {"pth": "x"}})
    ... except ValidationError as error:
    ...     print(validation_problems(error))
    model.pth: unknown key (value 'x')
    """
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "config"
        what = "unknown key" if item["type"] == "extra_forbidden" else item["msg"]
        value = repr(item["input"])
        value = value if len(value) <= 60 else value[:57] + "..."
        problems.append(f"{where}: {what} (value {value})")
    return "; ".join(problems)


def _yaml_problem(error: Any) -> str:
    """A YAML parse error in one line: what is wrong and where (1-based line and column)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else problem


def _import_yaml() -> Any:
    try:
        import yaml
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError(
            "reading trainer configs needs PyYAML; install it with `pip install palaestra[train]`"
        ) from error
    return yaml
