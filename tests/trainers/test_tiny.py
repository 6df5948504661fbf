"""``palaestra.trainers.tiny``: the tokenizer survives a save/load next to its model."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the tiny model needs torch (extra 'train')")
pytest.importorskip("transformers", reason="the tiny model needs transformers (extra 'train')")

from transformers import AutoTokenizer

from palaestra.trainers import tiny

TEXTS = [
    "Compute 3 + 2.",
    "\\boxed{15} and \\boxed{7}",
    "That is not correct. Check your work and try again (1 attempt left).",
]


def test_a_saved_policy_encodes_text_as_in_training(tmp_path: Path) -> None:
    # a directory holding a Qwen2 config reloads the tokenizer as Qwen2Tokenizer, which
    # rebuilds its pre-tokenizer: the trained one must already split text the same way
    tokenizer = tiny.train_tokenizer(TEXTS * 20, vocab_size=320)
    tiny.tiny_qwen2(len(tokenizer)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    chat = [{"role": "user", "content": TEXTS[0]}, {"role": "assistant", "content": TEXTS[1]}]
    for text in [*TEXTS, "user\nCompute 12 + 30.", " spaced  out\n\nlines "]:
        assert reloaded.encode(text, add_special_tokens=False) == tokenizer.encode(
            text, add_special_tokens=False
        ), text
    assert reloaded.apply_chat_template(chat, tokenize=False) == tokenizer.apply_chat_template(
        chat, tokenize=False
    )
    assert reloaded.eos_token == "<|im_end|>" and reloaded.pad_token == "<|endoftext|>"


def test_digits_are_tokens_of_their_own() -> None:
    tokenizer = tiny.train_tokenizer(["Compute 12 + 30."] * 50, vocab_size=300)
    pieces = [tokenizer.decode([i]) for i in tokenizer.encode("Compute 12 + 30.")]
    assert pieces[:5] == ["Compute", " ", "1", "2", " +"]


def test_init_std_sets_the_spread_of_the_initial_weights() -> None:
    narrow = tiny.tiny_qwen2(300, init_std=0.02).model.layers[0].mlp.up_proj.weight
    wide = tiny.tiny_qwen2(300, init_std=0.1).model.layers[0].mlp.up_proj.weight
    assert float(narrow.std()) == pytest.approx(0.02, rel=0.1)
    assert float(wide.std()) == pytest.approx(0.1, rel=0.1)
