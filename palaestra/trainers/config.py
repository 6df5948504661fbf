"""Typed trainer configuration, loadable from YAML or built in Python.

>>> config = TrainerConfig(advantage={"estimator": "grpo"}, rollout={"group_size": 8})
>>> config.loss.policy_loss
'ppo_clip'

Unknown keys are errors (a typo must not silently fall back to a default).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from palaestra.trainers.advantages import GROUPED_ESTIMATORS


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
    cov_ratio: float = Field(2e-4, ge=0.0, le=1.0, description="token fraction for Clip/KL-Cov")
    clip_cov_lb: float = 1.0
    clip_cov_ub: float = 5.0
    kl_cov_coef: float = Field(1.0, ge=0.0)
    kl_coef: float = Field(0.0, ge=0.0, description="weight of KL to the reference policy")
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    entropy_coef: float = Field(0.0, ge=0.0)
    aggregation: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"] = "token-mean"

    @model_validator(mode="after")
    def _check_cov_bounds(self) -> LossConfig:
        if self.clip_cov_lb > self.clip_cov_ub:
            raise ValueError(
                f"clip_cov_lb ({self.clip_cov_lb}) must not exceed clip_cov_ub ({self.clip_cov_ub})"
            )
        return self


class FilterConfig(_Section):
    """Batch filters (see :mod:`palaestra.trainers.filters`)."""

    drop_uniform_groups: bool = Field(False, description="drop groups whose returns are all equal")
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
    """The policy model."""

    path: str | None = Field(None, description="local path or id of a causal LM")
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    lora: LoraConfig | None = None
    gradient_checkpointing: bool = False


class RolloutConfig(_Section):
    """What the runner collects each step."""

    env_id: str = "game:GuessTheNumber-v0"
    group_size: int = Field(8, gt=0, description="episodes per task (same env id and seed)")
    groups_per_step: int = Field(8, gt=0)
    max_new_tokens: int = Field(256, gt=0, description="per turn")
    engine: Literal["hf", "vllm", "vllm-server"] = "hf"
    max_staleness: int = Field(
        0, ge=0, description="policy versions a rollout may lag behind (0 = synchronous)"
    )


class TrainerConfig(_Section):
    """Everything a training run needs; ``TrainerConfig.from_yaml(path)`` reads a file."""

    seed: int = 0
    steps: int = Field(100, gt=0)
    output_dir: str = "runs/default"
    eval_every: int = Field(0, ge=0, description="0 disables periodic eval")
    save_every: int = Field(0, ge=0, description="0 saves only at the end")
    model: ModelConfig = ModelConfig()
    rollout: RolloutConfig = RolloutConfig()
    advantage: AdvantageConfig = AdvantageConfig()
    loss: LossConfig = LossConfig()
    filters: FilterConfig = FilterConfig()
    optim: OptimConfig = OptimConfig()
    update: UpdateConfig = UpdateConfig()

    @model_validator(mode="after")
    def _check_groups(self) -> TrainerConfig:
        if self.advantage.estimator in GROUPED_ESTIMATORS and self.rollout.group_size < 2:
            raise ValueError(
                f"estimator {self.advantage.estimator!r} compares episodes of one task; "
                "set rollout.group_size >= 2"
            )
        return self

    @classmethod
    def from_yaml(cls, path: str | Path) -> TrainerConfig:
        """Load a config from a YAML file; every key is optional, unknown keys are errors."""
        yaml = _import_yaml()
        text = Path(path).read_text(encoding="utf-8")
        data = yaml.safe_load(text) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a trainer config must be a YAML mapping at the top level")
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise ValueError(f"invalid trainer config {path}:\n{error}") from None

    def to_yaml(self, path: str | Path | None = None) -> str:
        """The config as YAML text; also written to ``path`` when given."""
        yaml = _import_yaml()
        text = yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text


def _import_yaml() -> Any:
    try:
        import yaml
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError(
            "reading trainer configs needs PyYAML; install it with `pip install palaestra[train]`"
        ) from error
    return yaml
