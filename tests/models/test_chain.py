"""The long chain-of-thought task (`dataset: chain`): lengths, answers, determinism per seed,
and the settings that must cover its longest problems; the tiny-chain warm-up's stopping rule."""
import random
import re
import statistics
from itertools import islice
from pathlib import Path

import pytest

from jury.data.tasks import CHAIN_BUCKETS, CHAIN_HIGH, CHAIN_LOW, chain_problem, chain_problems, chain_solution, chain_terms, problem_stream
from jury.data.problems import PROMPT_SUFFIX, Problem
from jury.protocol.config_load import load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def chain_tokenizer():
    """tiny-chain's tokenizer, built alone (seconds; no model, no warm-up)."""
    from jury.models.chain import ChainModelSpec, build_chain_tokenizer

    spec = ChainModelSpec()
    return build_chain_tokenizer(spec, random.Random(spec.seed))


def test_a_worked_solution_by_hand():
    # from the last term down, totals with four digits: 21+20 = 41, +19 = 60, +18 = 78
    p = Problem("Compute 18+19+20+21.", "78", "chain")
    assert chain_terms(p.problem) == [18, 19, 20, 21]
    assert chain_solution(p) == "0021+20=0041\n0041+19=0060\n0060+18=0078\n\\boxed{0078}"
    assert chain_solution(Problem("Compute 97+98.", "195", "chain")) == "0098+97=0195\n\\boxed{0195}"


def test_answers_are_the_sums_and_every_line_adds_the_next_term():
    from jury.models.chain import boxed_value
    from jury.verifiers.arith_gate import arith_gate
    from jury.verifiers.math.verify import check, extract_answer

    for p in islice(chain_problems(3), 300):
        xs = chain_terms(p.problem)
        assert p.answer == str(sum(xs)) and p.source == "chain"
        assert xs == list(range(xs[0], xs[0] + len(xs))) and CHAIN_LOW <= xs[0] and xs[-1] <= CHAIN_HIGH, xs
        *lines, box = chain_solution(p).split("\n")
        assert boxed_value(box) == int(p.answer) and len(lines) == len(xs) - 1
        # the padded box is the answer to the label check (ground_truth), as 0078 is 78
        assert check(extract_answer(chain_solution(p)), p.answer) == "correct"
        total = xs[-1]
        for line, x in zip(lines, xs[-2::-1]):
            assert line == f"{total:04d}+{x}={total + x:04d}", (line, total, x)
            total += x
        assert {len(line) for line in lines} <= {12}  # every line the same shape
        # one expression per statement: the label-free arithmetic gate proves and refutes answers
        assert arith_gate(p.problem, p.answer) is True
        assert arith_gate(p.problem, str(sum(xs) + 1)) is False


def test_term_counts_are_long_tailed_over_2_to_40():
    counts = [len(chain_terms(p.problem)) for p in islice(chain_problems(0), 5000)]
    assert min(counts) == 2 and max(counts) >= 38 and max(counts) <= 40
    assert statistics.median(counts) <= 5           # most problems are short ...
    assert 0.05 < sum(n >= 20 for n in counts) / len(counts) < 0.2  # ... with a tail of long ones
    def chain_bucket(terms):
        return next(b for b in CHAIN_BUCKETS if b[0] <= terms <= b[1])

    assert chain_bucket(2) == (2, 3) and chain_bucket(40) == (16, 40)
    assert [b for b in CHAIN_BUCKETS if b[0] <= 9 <= b[1]] == [chain_bucket(9)]
    with pytest.raises(ValueError, match="terms must be in 2..40"):
        chain_problem(random.Random(0), 41)


def test_solution_token_lengths_span_more_than_ten_times(chain_tokenizer):
    lengths = sorted(len(chain_tokenizer(chain_solution(p), add_special_tokens=False)["input_ids"])
                     for p in islice(chain_problems(0), 2000))
    q = lambda f: lengths[int(f * (len(lengths) - 1))]  # noqa: E731
    # one line is 13 tokens (4 + 1 + 2 + 1 + 4 digits and signs, a newline), the box 7
    assert q(0.01) == 21 and q(0.5) <= 60 and q(0.99) >= 400, (q(0.01), q(0.5), q(0.99))
    assert q(0.99) >= 10 * q(0.01)
    # the digits are single tokens: "21" is two, whatever the corpus
    assert chain_tokenizer.tokenize("0121+33=0154") == ["0", "1", "2", "1", "+", "3", "3", "=", "0", "1", "5", "4"]


def test_same_seed_same_problems_other_seed_others():
    a = [p.problem for p in islice(chain_problems(7), 50)]
    assert a == [p.problem for p in islice(chain_problems(7), 50)]
    assert a == [p.problem for p in islice(problem_stream("chain", 7), 50)]
    assert a != [p.problem for p in islice(chain_problems(8), 50)]
    # the synthetic task is untouched by the new one
    assert next(problem_stream("synthetic", 0)).problem == "Compute 8*2."


def test_chain_config_covers_the_longest_problems(chain_tokenizer):
    """configs/chain.yaml's prompt and completion budgets hold the worst case: 40 terms, the
    largest ones (the longest box)."""
    from jury.models.chain import ChainModelSpec

    cfg = load_config(str(ROOT / "configs" / "chain.yaml"))
    assert (cfg.model, cfg.dataset, cfg.verifier.reward) == ("tiny-chain", "chain", "ground_truth")
    worst = Problem("Compute " + "+".join(map(str, range(CHAIN_HIGH - 39, CHAIN_HIGH + 1))) + ".", "", "chain")
    assert len(chain_terms(worst.problem)) == 40
    prompt = len(chain_tokenizer(worst.problem + PROMPT_SUFFIX)["input_ids"])
    completion = len(chain_tokenizer(chain_solution(worst), add_special_tokens=False)["input_ids"]) + 1  # </s>
    assert prompt <= cfg.max_prompt_tokens, prompt
    assert completion <= cfg.generator.max_new_tokens, completion
    assert cfg.max_prompt_tokens + cfg.generator.max_new_tokens <= cfg.max_model_len <= ChainModelSpec().max_positions


def test_a_run_on_the_chain_task_is_checked_like_the_synthetic_one():
    from jury.data.problems import DataError
    from jury.data.checks import check_data
    from jury.experiments.evaluate import default_dataset, load_problems

    assert check_data(load_config(None, ["dataset=chain"])).train is None  # built in: nothing to read
    with pytest.raises(DataError, match="the chain task has no end"):
        check_data(load_config(None, ["dataset=chain", "data.epochs=1"]))
    assert [p.problem for p in load_problems("chain", 0, 3)] == [p.problem for p in islice(chain_problems(0), 3)]
    assert default_dataset({"dataset": "chain"}, None) == "chain"
    assert default_dataset({"dataset": "/data/x.jsonl"}, None) == "synthetic"


def test_warm_up_stops_only_where_the_pass_rate_falls_with_length():
    from jury.models.chain import ChainModelSpec, acceptable, bucket_weights, eval_sets, falls_with_length

    assert falls_with_length([0.7, 0.4, 0.1, 0.0]) and falls_with_length([0.5, 0.5, 0.2, 0.2])
    assert not falls_with_length([0.3, 0.4, 0.1, 0.0])   # a longer bucket passes more often
    assert not falls_with_length([0.0, 0.0, 0.0, 0.0])   # flat is not falling
    spec = ChainModelSpec()
    assert acceptable(0.35, [0.6, 0.3, 0.1, 0.02], spec)
    assert not acceptable(0.65, [0.9, 0.6, 0.4, 0.2], spec)  # above the range
    assert not acceptable(0.05, [0.1, 0.05, 0.0, 0.0], spec)  # below it
    weights = bucket_weights()
    assert sum(weights) == pytest.approx(1) and weights[0] > weights[-1] > 0.1
    sets = eval_sets(8)
    assert [[p.problem for p in s] for s in sets] == [[p.problem for p in s] for s in eval_sets(8)]
    for (lo, hi), problems in zip(CHAIN_BUCKETS, sets):
        assert all(lo <= len(chain_terms(p.problem)) <= hi for p in problems)


def test_local_model_names_include_tiny_chain():
    from jury.cluster.driver import preflight
    from jury.models.registry import LOCAL_MODELS
    from jury.models.tiny import TinyModelSpec

    assert tuple(LOCAL_MODELS) == ("tiny", "tiny-chat", "tiny-chain")
    preflight(load_config(str(ROOT / "configs" / "chain.yaml")))  # a local name, not a folder: accepted
    # the tiny model and its default run stay as they were
    assert (TinyModelSpec().version, TinyModelSpec().max_positions, TinyModelSpec().vocab) == (3, 4096, 384)
    assert re.fullmatch(r"Compute \d+[-+*]\d+\.", next(problem_stream("synthetic", 1)).problem)
