"""`jury select`: input checking, and a real judge model (the tiny one) picking among candidates."""
import json

import pytest

from jury.experiments.select import read_items


def test_bad_input_is_refused_with_the_line(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text('{"problem": "p", "candidates": ["a", "b"]}\n{"problem": "p", "candidates": []}\n')
    with pytest.raises(ValueError, match="c.jsonl:2"):
        read_items(str(f))
    f.write_text("")
    with pytest.raises(ValueError, match="no problems"):
        read_items(str(f))


def test_a_model_folder_that_is_not_one_is_refused_before_an_engine_starts(tmp_path, capsys):
    import argparse

    from jury.experiments.select import add_command
    f = tmp_path / "c.jsonl"
    f.write_text('{"problem": "p", "candidates": ["a", "b"]}\n')
    parser = argparse.ArgumentParser()
    add_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["select", "--model", str(tmp_path / "nowhere"), "--input", str(f)])
    assert args.func(args) == 2
    assert f"model: {tmp_path / 'nowhere'} is not a Hugging Face model folder (no config.json)" in capsys.readouterr().err


@pytest.mark.slow
def test_tournament_with_a_real_judge_counts_calls_as_the_paper(tiny_model_path, tmp_path):
    from jury.experiments.cli import main

    items = [{"problem": "Compute 5+7.", "candidates": [f"\\boxed{{{x}}}" for x in (11, 12, 13, 14, 15)],
              "answer": "12"},
             {"problem": "Compute 2*3.", "candidates": ["\\boxed{6}", "\\boxed{5}"], "answer": "6"}]
    f = tmp_path / "c.jsonl"
    f.write_text("\n".join(json.dumps(i) for i in items))
    out = tmp_path / "out.json"
    assert main(["select", "--model", tiny_model_path, "--input", str(f), "--method", "tournament",
                 "--max-tokens", "8", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    # a knockout over n candidates plays n - 1 matches, one LLM call each
    assert [r["llm_calls"] for r in res["selections"]] == [4, 1]
    assert all(0 <= r["index"] < len(i["candidates"]) for r, i in zip(res["selections"], items))
    assert res["llm_calls_per_problem"] == 2.5
    assert res["accuracy"] in (0.0, 0.5, 1.0)
