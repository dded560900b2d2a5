"""Chapter 9's exercises: each answer checked against hand arithmetic, and a wrong one refused."""

from helpers import check_exercise


def test_stall_from_the_printed_engine_cost(capsys):
    context = dict(fixed_ms=2.0, per_token_us=50.0, per_sequence_us=100.0, per_score_ns=200.0, decoding=8, context=64,
                   prompt_tokens=1000)
    scores_ms = 1008 * (8 * 64 + 1000) * 200 / 1e6  # 304.8 ms
    check_exercise("9.1", 2.0 + 1008 * 0.05 + 9 * 0.1 + scores_ms, **context)  # 358.1 ms
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("9.1", 2.0 + 8 * 0.05 + 8 * 0.1, **context)  # a decode step without the prompt
    assert capsys.readouterr().out.startswith("Not quite")
    prompt_only = 1000 * 1000 * 200 / 1e6  # the prompt's own scores, the decodes' keys forgotten
    check_exercise("9.1", 2.0 + 1008 * 0.05 + 9 * 0.1 + prompt_only, **context)
    assert capsys.readouterr().out.startswith("Not quite")


def test_chunked_steps_to_first_token(capsys):
    check_exercise("9.2", 13, budget=256, decoding=16, prompt_tokens=3000)  # ceil(3000 / 240)
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("9.2", 12, budget=256, decoding=16, prompt_tokens=3000)  # ceil(3000 / 256): decodes forgotten
    assert capsys.readouterr().out.startswith("Not quite")


def test_kv_transfer_over_ethernet(capsys):
    context = dict(model="llama-3-8b", prompt_tokens=8192, link_bytes_per_s=12.5e9)
    check_exercise("9.3", 2 * 32 * 8 * 128 * 2 * 8192 / 12.5e9 * 1e3, **context)  # 1 GiB: 85.9 ms
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("9.3", 2 * 32 * 32 * 128 * 2 * 8192 / 12.5e9 * 1e3, **context)  # query heads: 4x too much
    assert capsys.readouterr().out.startswith("Not quite")
