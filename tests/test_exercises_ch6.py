from helpers import check_exercise


def test_blocks_held(capsys):
    context = dict(prompt_len=40, output_len=25, block_size=16)  # 64 tokens in the cache (the last is never fed back)
    check_exercise("6.1", 4, **context)
    assert capsys.readouterr().out.startswith("Correct")
    for wrong in (5, 65 / 16):
        check_exercise("6.1", wrong, **context)
        assert capsys.readouterr().out.startswith("Not quite")
    check_exercise("6.1", None, **context)
    assert capsys.readouterr().out.startswith("Not answered yet")


def test_which_engine_pads(capsys):
    check_exercise("6.2", "generate")
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("6.2", "generate_batch")
    assert capsys.readouterr().out.startswith("Not quite")


def test_saturated_rate(capsys):
    context = dict(fixed_s=0.010, per_token_s=0.0005, per_sequence_s=0.0005, batch=8, output_len=16)
    check_exercise("6.3", 8 / (16 * 0.018), **context)  # a step of 8 sequences: 10 + 8 x 1 ms
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("6.3", 1 / (16 * 0.018), **context)  # one request's rate, not the batch's
    assert capsys.readouterr().out.startswith("Not quite")


def test_idle_ttft_from_the_printed_engine_cost(capsys):
    context = dict(fixed_ms=12.5, per_token_us=150.0, per_sequence_us=800, prompt_len=64)
    check_exercise("6.4", 12.5 + 9.6 + 0.8, **context)  # one step: fixed + 64 tokens + one sequence
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("6.4", 12.5, **context)  # the prompt's tokens left out
    assert capsys.readouterr().out.startswith("Not quite")
