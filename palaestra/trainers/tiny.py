"""A tiny causal LM built locally, with nothing downloaded: a byte-level BPE tokenizer trained
on a few texts (with a ChatML chat template) and a random-init 2-layer Qwen2 sized to it.

Used by the CPU demo and the tests; any text encodes, since the alphabet is all 256 bytes.
The tokenizer splits text the way Qwen2's does (NFC, then Qwen2's pre-tokenizer regex: words,
single digits, punctuation runs), because ``AutoTokenizer.from_pretrained`` on a directory
that also holds a Qwen2 model config rebuilds it as a ``Qwen2Tokenizer`` with that pipeline:
a saved policy must encode text exactly as it did in training.

>>> tokenizer = train_tokenizer(["I am thinking of a number."], vocab_size=300)  # doctest: +SKIP
>>> model = tiny_qwen2(len(tokenizer), seed=0)                                 # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

QWEN2_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""Qwen2's pre-tokenizer regex: every digit is a token of its own, words keep a leading space
or punctuation mark."""

CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""ChatML, as Qwen2 uses it: ``<|im_start|>role\\ncontent<|im_end|>\\n`` per message."""


def train_tokenizer(texts: Iterable[str], *, vocab_size: int = 512) -> Any:
    """A byte-level BPE tokenizer trained on ``texts``, with ChatML special tokens and template.

    ``<|im_end|>`` is the EOS token (the end of an assistant turn), ``<|endoftext|>`` pads.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    minimum = 256 + len(SPECIAL_TOKENS)
    if vocab_size < minimum:
        raise ValueError(f"vocab_size must be >= {minimum} (256 bytes + special tokens)")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHATML_TEMPLATE,
    )


def tiny_qwen2(
    vocab_size: int,
    *,
    seed: int = 0,
    hidden_size: int = 128,
    num_layers: int = 2,
    max_positions: int = 1024,
    init_std: float = 0.02,
) -> Any:
    """A random-init Qwen2 causal LM (head_dim 64, tied embeddings) in float32.

    ``init_std`` is the standard deviation of the initial weights (Qwen2's default is 0.02);
    a larger one, such as 0.1, shortens the plateau before a model this small starts to
    attend to earlier tokens.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=hidden_size // 64,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        initializer_range=init_std,
    )
    return Qwen2ForCausalLM(config).float()
