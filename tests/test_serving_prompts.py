"""Unit tests for the serving client's prompts: exact lengths with the model's tokenizer, the server's count kept."""

import numpy as np
import pytest
from fake_sse_server import fake_server
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

import helpers
from helpers.course.serving.requests import Request
from helpers.course.serving.server import benchmark_server


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer with no merges: one token per byte, so " the" is four tokens, not one."""
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok)


@pytest.mark.parametrize("tokenizer", [byte_tokenizer(), helpers.offline_tokenizer(8192)], ids=["bytes", "bpe"])
def test_prompt_text_with_the_tokenizer_is_exactly_prompt_len_tokens(tokenizer):
    rng = np.random.default_rng(0)
    for n in (1, 7, 64, 300):
        assert len(tokenizer.encode(helpers.prompt_text(n, rng, tokenizer), add_special_tokens=False)) == n


def test_word_prompts_are_exact_only_for_gpt2_style_tokenizers():
    rng = np.random.default_rng(0)
    words = helpers.prompt_text(64, rng)
    assert len(helpers.offline_tokenizer(8192).encode(words)) == 64
    assert len(byte_tokenizer().encode(words)) > 2 * 64  # another tokenizer counts words as several tokens


def test_benchmark_keeps_the_servers_count_and_warns_when_it_differs():
    asked = [Request(0, 0.0, 32, 2), Request(1, 0.0, 48, 2)]
    with fake_server(count_prompt=lambda prompt: len(prompt.encode())) as url:  # as the byte tokenizer counts
        with pytest.warns(UserWarning, match="pass the model's tokenizer"):
            words = benchmark_server(url, "fake", asked, seed=0)
        exact = benchmark_server(url, "fake", asked, seed=0, tokenizer=byte_tokenizer())
    assert all(s.request.prompt_len > 2 * r.prompt_len for s, r in zip(words, asked, strict=True))
    assert [s.request.prompt_len for s in exact] == [32, 48]
