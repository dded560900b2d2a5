import pytest
import torch

import helpers


def test_kv_cache_bytes_formula():
    assert helpers.kv_cache_bytes(12, 12, 64, 1) == 36_864
    assert helpers.kv_cache_bytes(n_layers=32, n_kv_heads=8, head_dim=128, seq_len=1000, batch_size=4,
                                  bytes_per_elem=1) == 2 * 32 * 8 * 128 * 1000 * 4


@pytest.mark.parametrize("name", ["n_layers", "n_kv_heads", "head_dim", "seq_len", "batch_size", "bytes_per_elem"])
@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_kv_cache_bytes_rejects_bad_input(name, bad):
    args = dict(n_layers=2, n_kv_heads=2, head_dim=8, seq_len=4, batch_size=1, bytes_per_elem=2)
    args[name] = bad
    with pytest.raises(ValueError, match=f"{name} must be an integer >= 1"):
        helpers.kv_cache_bytes(**args)


@pytest.fixture(scope="module")
def small_gpt2():
    config = helpers.build_config(helpers.model_spec("gpt2"))
    config.update(dict(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=128))
    return helpers.random_model(config, "cpu", torch.float32)


def test_cache_round_trip_and_bytes_match_formula(small_gpt2):
    ids = torch.randint(0, 256, (3, 10))
    with torch.no_grad():
        out = small_gpt2(ids, use_cache=True)
        cache = helpers.get_cache(out)
        assert helpers.cache_nbytes(cache) == helpers.kv_cache_bytes(2, 4, 16, 10, 3, 4)
        out2 = small_gpt2(ids[:, -1:], **helpers.cache_kwargs(small_gpt2, cache), use_cache=True)
    assert helpers.cache_nbytes(helpers.get_cache(out2)) == helpers.kv_cache_bytes(2, 4, 16, 11, 3, 4)
    assert len(helpers.cache_tensors(cache)) == 4  # K and V for 2 layers


def test_cached_decode_equals_full_forward(small_gpt2):
    ids = torch.randint(0, 256, (1, 12))
    with torch.no_grad():
        full = small_gpt2(ids).logits[:, -1]
        cache = helpers.get_cache(small_gpt2(ids[:, :-1], use_cache=True))
        step = small_gpt2(ids[:, -1:], **helpers.cache_kwargs(small_gpt2, cache), use_cache=True).logits[:, -1]
    assert torch.allclose(full, step, atol=1e-4)


def test_get_cache_errors_without_cache():
    class NoCache:
        logits = None

    with pytest.raises(ValueError, match="use_cache=True"):
        helpers.get_cache(NoCache())


def test_cache_kwargs_uses_the_forward_keyword(small_gpt2):
    import inspect

    (key,) = helpers.cache_kwargs(small_gpt2, None)
    assert key in inspect.signature(type(small_gpt2).forward).parameters
