import socket

import pytest
import torch
from transformers import AutoModelForCausalLM

import helpers


@pytest.mark.parametrize("name", sorted(helpers.MODEL_SPECS))
def test_spec_parameter_count_matches_the_built_architecture(name):
    spec = helpers.model_spec(name)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(helpers.build_config(spec))
    assert sum(p.numel() for p in model.parameters()) == spec.n_params
    assert model.config.num_hidden_layers == spec.n_layers
    assert model.config.num_key_value_heads == spec.n_kv_heads if spec.family != "gpt2" else True


def test_published_facts():
    assert helpers.model_spec("llama-3-8b").n_kv_heads == 8
    assert helpers.model_spec("llama-2-7b").n_kv_heads == 32
    qwen = helpers.model_spec("qwen3-0.6b")
    assert qwen.head_dim != qwen.d_model // qwen.n_heads
    assert helpers.model_spec("gpt2").kv_bytes_per_token(2) == 36_864
    assert helpers.model_spec("gpt2-large").kv_bytes_per_token(2) == 184_320
    assert helpers.model_spec("llama-2-7b").kv_bytes_per_token(2) == 524_288
    assert helpers.model_spec("llama-3-8b").kv_bytes_per_token(2) == 131_072
    assert helpers.model_spec("llama-3-70b").kv_bytes_per_token(2) == 327_680
    assert helpers.model_spec("gpt2").weight_bytes(4) == 4 * 124_439_808


def test_model_spec_unknown_name():
    with pytest.raises(ValueError, match="name must be one of"):
        helpers.model_spec("gpt5")


def test_load_model_offline_gives_random_weights_that_run(monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model, tokenizer = helpers.load_model("gpt2", "cpu")
    assert "RANDOM weights" in capsys.readouterr().out
    assert not helpers.weights_are_pretrained(model)
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()  # tied
    ids = tokenizer("The cache grows with every token.", return_tensors="pt").input_ids
    assert ids.max() < model.config.vocab_size
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], 50257) and torch.isfinite(logits).all()
    assert isinstance(tokenizer.decode([50000, tokenizer.eos_token_id]), str)


def test_hub_reachable_tells_an_open_port_from_a_closed_one():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert helpers.plumbing.hub.hub_reachable(f"http://127.0.0.1:{port}")
    assert not helpers.plumbing.hub.hub_reachable(f"http://127.0.0.1:{port}", timeout_s=1.0)  # closed now


def test_unreachable_hub_counts_as_offline(monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once the socket is closed
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    assert helpers.plumbing.hub.hub_unavailable()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert helpers.plumbing.hub.hub_unavailable()


def test_random_llama_with_gqa_matches_its_config():
    config = helpers.build_config(helpers.model_spec("llama-3-8b"))
    config.update(dict(num_hidden_layers=2, hidden_size=128, intermediate_size=256, vocab_size=512,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=32))
    model = helpers.random_model(config, "cpu", torch.float32)
    reference = AutoModelForCausalLM.from_config(config)
    assert torch.allclose(model.model.rotary_emb.inv_freq, reference.model.rotary_emb.inv_freq)
    with torch.no_grad():
        assert torch.isfinite(model(torch.tensor([[1, 2, 3]])).logits).all()


def test_offline_tokenizer_round_trip_and_validation():
    tok = helpers.offline_tokenizer(50257)
    text = "Prefill is compute-bound; decode is memory-bound."
    assert tok.decode(tok(text).input_ids) == text
    assert len(tok) == 50257 and tok.eos_token_id == 50256
    with pytest.raises(ValueError, match="learned"):
        helpers.offline_tokenizer(1000, learned=5000)


def test_architecture_spec_counts_parameters_of_a_spec_or_a_config():
    config = helpers.gpt2_style_config(64, 2, 4, 128, vocab_size=512)
    from_config = helpers.architecture_spec(config, name="tiny")
    model = helpers.random_model(config, "cpu", torch.float32)
    assert from_config.n_params == model.num_parameters() and from_config.d_ff == 256
    cut = helpers.architecture_spec(helpers.model_spec("gpt2"), n_layers=1)
    assert cut.n_layers == 1 and cut.n_params < helpers.model_spec("gpt2").n_params
    with pytest.raises(ValueError, match="changes to a config"):
        helpers.architecture_spec(config, n_layers=3)
