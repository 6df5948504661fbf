"""examples/science/: the miniature reproductions run end to end and write their results.

The fast test runs the loss-masking script for one step on a barely warmed-up policy. The
slow tests run each script on one seed and few steps. Where a finding did not reproduce at
this scale (docs/science.md: the discount and credit-assignment findings), they check that
the results are well-formed and the runs healthy, not a direction that was not seen; for
loss masking they check what reproduced in a few steps: env tokens take most of the
gradient when they are trained on.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="training needs the 'train' extra")
pytest.importorskip("transformers", reason="training needs the 'train' extra")

SCIENCE = Path(__file__).parents[2] / "examples" / "science"


def _script(name: str):
    """Import ``examples/science/<name>.py`` (its folder on sys.path, for ``common``)."""
    if str(SCIENCE) not in sys.path:
        sys.path.insert(0, str(SCIENCE))
    spec = importlib.util.spec_from_file_location(f"science_{name}", SCIENCE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _results(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_loss_masking_runs_end_to_end_and_rereads_its_runs(tmp_path):
    script = _script("loss_masking")
    argv = ["--seeds", "0", "--steps", "1", "--sft-steps", "1", "--demos", "4"]
    argv += ["--output-dir", str(tmp_path)]
    summary = script.main(argv)
    results = _results(tmp_path / "loss_masking.json")
    assert (tmp_path / "loss_masking.png").stat().st_size > 0
    assert set(results["histories"]) == {"masked", "unmasked"}
    masked, unmasked = (results["histories"][name]["0"] for name in ("masked", "unmasked"))
    assert [r["step"] for r in masked] == [0, 1]  # the probe before training, then step 1
    # the same tasks from the same policy; the unmasked run may also train on env tokens
    # (a barely warmed-up policy answers at once, so its episodes may have none)
    assert 0 < masked[1]["num_tokens"] <= unmasked[1]["num_tokens"]
    assert 0.0 <= masked[0]["probe/env_token_share"] < 1.0
    assert summary["masked"]["reward"]["first_steps"]["per_seed"] == [masked[1]["reward"]]
    # --summarize trains nothing and rebuilds the same summary from the run directories
    (tmp_path / "loss_masking.json").unlink()
    again = script.main([*argv, "--summarize"])
    assert again["unmasked"]["num_tokens"] == summary["unmasked"]["num_tokens"]
    assert _results(tmp_path / "loss_masking.json")["summary"] == _results_roundtrip(summary)


def _results_roundtrip(value):
    """``value`` as it reads back from a results file (string keys, NaN as null)."""
    return json.loads(json.dumps(value).replace("NaN", "null"))


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a warm start and a few steps: minutes on 2 shared cores
def test_env_tokens_take_most_of_the_gradient_when_unmasked(tmp_path):
    """What reproduced (docs/science.md): with the python tool, env tokens are about 30% of
    the loss tokens but about two thirds of the gradient once they are trained on. (That
    masking them keeps the reward higher is seen over 40 steps and 3 seeds, too slow to
    check here.)"""
    summary = _script("loss_masking").main(
        ["--seeds", "0", "--steps", "2", "--output-dir", str(tmp_path)]
    )
    start = {
        key: summary["unmasked"][key]["start"]["mean"]
        for key in summary["unmasked"]
        if key.startswith("probe/")
    }
    assert 0.1 < start["probe/env_token_share"] < 0.5
    assert start["probe/env_grad_share"] > 0.5
    assert start["probe/env_grad_share"] > start["probe/env_token_share"]
    assert start["probe/reward"] > 0.3  # the warm start uses the tool and answers


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a warm start and a few steps: minutes on 2 shared cores
def test_discount_runs_are_well_formed(tmp_path):
    """Not reproduced at this scale (docs/science.md), so no direction is checked: every
    gamma trains from the same warm start and reports turns within the game's limits."""
    summary = _script("discount_turns").main(
        ["--seeds", "0", "--steps", "3", "--output-dir", str(tmp_path), "--max-number", "20"]
    )
    results = _results(tmp_path / "discount_turns.json")
    assert set(summary) == {"gamma=1.0", "gamma=0.9", "gamma=0.7"}
    assert results["binary_search_mean_turns"] == pytest.approx(3.7)  # 74 guesses / 20
    starts = {name: s["eval/turns"]["start"]["mean"] for name, s in summary.items()}
    assert max(starts.values()) - min(starts.values()) < 0.1  # one warm start for every gamma
    for name, s in summary.items():
        assert all(1.0 <= t <= 20 for t in s["turns"]["curve_mean"]), name
        assert math.isfinite(s["success"]["last_steps"]["mean"])


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a warm start and a few steps: minutes on 2 shared cores
def test_credit_assignment_runs_are_well_formed(tmp_path):
    """Not reproduced at this scale (docs/science.md), so no direction is checked: the four
    conditions train and the dense reward is the final one plus the shaping."""
    summary = _script("credit_assignment").main(
        ["--seeds", "0", "--steps", "2", "--output-dir", str(tmp_path)]
    )
    assert set(summary) == {"dense/rebn", "dense/grpo", "final/rebn", "final/grpo"}
    for name, s in summary.items():
        reward, success = s["reward"]["curve_mean"], s["success"]["curve_mean"]
        if name.startswith("final"):
            assert reward == success  # reward 1 for the hit, nothing else
        else:
            assert all(r >= x for r, x in zip(reward, success, strict=True))
