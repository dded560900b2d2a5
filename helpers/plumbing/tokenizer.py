"""A byte-level BPE tokenizer made offline, for models whose own tokenizer cannot be downloaded."""

from __future__ import annotations

import importlib
import inspect
import json
from functools import lru_cache

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

END_OF_TEXT = "<|endoftext|>"


def _corpus() -> list[str]:
    """English text that ships with Python: the docstrings of some standard-library modules."""
    texts = []
    for name in ("argparse", "collections", "json", "logging", "os", "pathlib", "re", "statistics", "string"):
        module = importlib.import_module(name)
        for _, obj in inspect.getmembers(module):
            doc = inspect.getdoc(obj)
            if doc:
                texts.append(doc)
    return texts


@lru_cache(maxsize=4)
def offline_tokenizer(vocab_size: int = 50257, learned: int = 4000) -> PreTrainedTokenizerFast:
    """A GPT-2-style byte-level BPE trained here on stdlib docstrings, padded to `vocab_size` ids."""
    if not 300 <= learned < vocab_size:
        raise ValueError(f"learned must be in [300, vocab_size={vocab_size}), got {learned}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=learned, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    # Pad the vocabulary so every id a model of `vocab_size` can emit decodes to something visible.
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    for i in range(len(vocab), vocab_size - 1):
        vocab[f"Ġ<{i}>"] = i
    vocab[END_OF_TEXT] = vocab_size - 1
    tok = Tokenizer.from_str(json.dumps(data))
    tok.add_special_tokens([END_OF_TEXT])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=END_OF_TEXT, bos_token=END_OF_TEXT,
                                   pad_token=END_OF_TEXT)
