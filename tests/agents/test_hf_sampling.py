"""The HF agent's batched sampler against the exact distribution and a per-row sampler."""

from __future__ import annotations

import pytest

torch = pytest.importorskip(
    "torch", reason="the HF agent needs torch (pip install 'palaestra[hf]')"
)
stats = pytest.importorskip("scipy.stats", reason="the statistical tests need scipy")

from palaestra.agents.hf_sampling import request_uniforms, sample_rows  # noqa: E402

LOGITS = torch.tensor([2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0])
DRAWS = 40_000
P_MIN = 1e-3
"""A sample whose chi-square p-value falls below this is not from the distribution (the seeds
are fixed, so the outcome is the same on every run)."""

SETTINGS = [  # temperature, top_p, top_k
    (1.0, 1.0, None),
    (0.7, 1.0, None),
    (1.5, 0.8, None),
    (1.0, 1.0, 3),
    (0.8, 0.6, 5),
    (1.0, 0.7, 3),  # top-p of the top-k tokens' own mass (0.7 of all would keep all 3)
]


def expected_probs(temperature: float, top_p: float, top_k: int | None) -> torch.Tensor:
    """The distribution a row of ``LOGITS`` is drawn from, computed token by token: the
    ``top_k`` most likely tokens, then the fewest of those holding ``top_p`` of their mass."""
    probs = torch.softmax(LOGITS.double() / temperature, dim=-1)
    order = probs.argsort(descending=True).tolist()
    kept = order[:top_k] if top_k is not None else order
    mass, chosen = 0.0, []
    total = float(probs[kept].sum())
    for token in kept:
        if mass >= top_p * total:
            break
        chosen.append(token)
        mass += float(probs[token])
    narrowed = torch.zeros_like(probs)
    narrowed[chosen] = probs[chosen]
    return narrowed / narrowed.sum()


@pytest.fixture(scope="module")
def uniforms() -> torch.Tensor:
    """The first uniform of each of ``DRAWS`` requests (seeds 0, 1, ...)."""
    return torch.cat([request_uniforms(seed, 1) for seed in range(DRAWS)])


def batched_draws(uniforms, temperature: float, top_p: float, top_k: int | None) -> torch.Tensor:
    """``DRAWS`` rows of ``LOGITS``, each at its own request's uniform, sampled at once."""
    logits = LOGITS.expand(DRAWS, -1)
    tokens, _ = sample_rows(logits, uniforms, temperature=temperature, top_p=top_p, top_k=top_k)
    return tokens


def multinomial_draws(temperature: float, top_p: float, top_k: int | None) -> torch.Tensor:
    """The same number of draws from the reference sampler, ``torch.multinomial`` (what the
    agent used row by row before), on the distribution of :func:`expected_probs`."""
    probs = expected_probs(temperature, top_p, top_k)
    generator = torch.Generator().manual_seed(1)
    return torch.multinomial(probs, DRAWS, replacement=True, generator=generator)


def counts(tokens: torch.Tensor) -> torch.Tensor:
    return torch.bincount(tokens, minlength=len(LOGITS)).double()


def goodness_of_fit(tokens: torch.Tensor, probs: torch.Tensor) -> float:
    """The chi-square p-value of ``tokens`` under ``probs``; a token of probability 0 that
    was drawn gives 0."""
    observed = counts(tokens)
    if (observed[probs == 0] > 0).any():
        return 0.0
    support = probs > 0
    return float(stats.chisquare(observed[support], (probs[support] * DRAWS)).pvalue)


@pytest.mark.parametrize(("temperature", "top_p", "top_k"), SETTINGS)
def test_batched_draws_follow_the_narrowed_tempered_distribution(
    uniforms, temperature, top_p, top_k
):
    tokens = batched_draws(uniforms, temperature, top_p, top_k)
    assert goodness_of_fit(tokens, expected_probs(temperature, top_p, top_k)) > P_MIN


@pytest.mark.parametrize(("temperature", "top_p", "top_k"), SETTINGS)
def test_batched_and_multinomial_draws_have_the_same_distribution(
    uniforms, temperature, top_p, top_k
):
    batched = counts(batched_draws(uniforms, temperature, top_p, top_k))
    reference = counts(multinomial_draws(temperature, top_p, top_k))
    table = torch.stack([batched, reference])
    table = table[:, table.sum(dim=0) > 0]
    assert float(stats.chi2_contingency(table.numpy()).pvalue) > P_MIN


@pytest.mark.parametrize(
    ("wrong", "right"),
    [((1.0, 1.0, None), (0.9, 1.0, None)), ((1.0, 0.9, None), (1.0, 1.0, None))],
)
def test_the_fit_test_rejects_a_slightly_wrong_distribution(uniforms, wrong, right):
    """The tests above have the power to notice a 10% error in temperature or top-p."""
    assert goodness_of_fit(batched_draws(uniforms, *wrong), expected_probs(*right)) < P_MIN
    table = torch.stack(
        [counts(batched_draws(uniforms, *wrong)), counts(multinomial_draws(*right))]
    )
    table = table[:, table.sum(dim=0) > 0]
    assert float(stats.chi2_contingency(table.numpy()).pvalue) < P_MIN


def test_each_row_depends_only_on_its_logits_and_uniform():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(16, 50, generator=generator) * 3
    uniforms = torch.rand(16, generator=generator, dtype=torch.float64)
    for options in ({}, {"temperature": 0.7, "top_p": 0.9}, {"top_k": 5}):
        together, logprobs = sample_rows(logits, uniforms, **options)
        for row in range(16):
            alone, logprob = sample_rows(logits[row : row + 1], uniforms[row : row + 1], **options)
            assert alone.item() == together[row].item()
            assert logprob.item() == pytest.approx(logprobs[row].item(), abs=1e-6)


def test_the_reported_logprob_is_the_tempered_one_whatever_the_narrowing():
    logits = LOGITS.expand(4, -1)
    uniforms = torch.tensor([0.0, 0.3, 0.6, 0.99], dtype=torch.float64)
    tokens, logprobs = sample_rows(logits, uniforms, temperature=0.5, top_p=0.5, top_k=2)
    tempered = torch.log_softmax(LOGITS / 0.5, dim=-1)
    assert set(tokens.tolist()) <= {0, 1}
    assert torch.allclose(logprobs, tempered[tokens])


def test_temperature_zero_takes_the_most_likely_token_at_temperature_one():
    logits = torch.tensor([[0.0, 3.0, 1.0], [5.0, 0.0, 4.0]])
    tokens, logprobs = sample_rows(
        logits, torch.tensor([0.99, 0.99], dtype=torch.float64), temperature=0
    )
    assert tokens.tolist() == [1, 0]
    assert torch.allclose(logprobs, torch.log_softmax(logits, dim=-1)[[0, 1], [1, 0]])


def test_a_uniform_picks_the_token_whose_cumulative_interval_holds_it():
    logits = torch.log(torch.tensor([0.25, 0.5, 0.25])).expand(5, -1)
    uniforms = torch.tensor([0.0, 0.2499, 0.2501, 0.7501, 1 - 2**-53], dtype=torch.float64)
    tokens, _ = sample_rows(logits, uniforms)
    assert tokens.tolist() == [0, 0, 1, 2, 2]


def test_tokens_of_probability_zero_are_never_drawn_even_at_the_top_of_the_range():
    logits = torch.tensor([[0.0, 0.0, -1e4, -1e4]])  # the last two underflow to 0
    for u in (0.0, 0.5, 1 - 2**-53):
        token, _ = sample_rows(logits, torch.tensor([u], dtype=torch.float64))
        assert token.item() in (0, 1)
    top_p, _ = sample_rows(LOGITS[None], torch.tensor([1 - 2**-53], dtype=torch.float64), top_p=0.3)
    assert top_p.item() == 0


def test_a_request_draws_the_same_uniforms_for_the_same_seed():
    assert torch.equal(request_uniforms(7, 10), request_uniforms(7, 10))
    assert not torch.equal(request_uniforms(7, 10), request_uniforms(8, 10))
    assert torch.equal(request_uniforms(7, 10)[:4], request_uniforms(7, 4))
