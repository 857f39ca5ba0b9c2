"""Evaluation: pass@k and answer diversity of a policy on held-out problems.

    problems ──the run's prompt format, n samples each──> texts ──the label checker──> answers
       answers ──the checker: cache, quick check, a pool with a hard timeout──> c correct of n
       (n, c) ──pass_at_k──> pass@k        answers ──the checker's vote key──> distinct answers

Used two ways: `jury eval CHECKPOINT` (experiments/evaluate.py, its own vLLM engine) and
evaluation during training (`eval.every`, `Evaluator` below), which samples through the
run's own generators: no extra engine, and no task goes through the feeder, so the
staleness accounting never sees these requests. Its metrics are `eval/*`.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass

log = logging.getLogger(__name__)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of Chen et al. (2021): 1 - C(n-c, k) / C(n, k).

    Written as 1 - prod_{i=n-c+1..n} (1 - k/i): the binomials overflow a float for n in
    the hundreds, the product of factors in [0, 1] never does.
    """
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:  # every draw of k samples holds a correct one
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


@dataclass(frozen=True)
class ProblemResult:
    problem: str
    label: str
    answers: list            # extracted final answer per sample (None: no answer)
    verdicts: list[str]      # check's verdict per sample, or "timeout" / "error" from the pool
    correct: int
    distinct: int            # distinct parsable answers (answer_key), as the verifier counts them


def grade(problems: list, completions: list[list[str]], *, timeout_s: float = 5.0, pool_workers: int = 1,
          verifier=None) -> list[ProblemResult]:
    """Verdicts and distinct answers for each problem's samples, as the verifier worker judges them:
    the same label checker (verifiers/math/checker.py) with the run's verifier settings (`verifier`,
    a VerifierConfig: unanchored answers, rounding), its pool bounding each check by `timeout_s`."""
    from dataclasses import replace

    from jury.protocol.config import VerifierConfig
    from jury.verifiers.math import MathChecker

    checker = MathChecker(replace(verifier or VerifierConfig(), check_timeout_s=timeout_s, pool_workers=pool_workers))
    try:
        out = []
        for p, texts in zip(problems, completions):
            answers = [checker.extract(t) for t in texts]
            verdicts = [v.kind for v in checker.check(answers, p.answer, texts)]
            out.append(ProblemResult(problem=p.problem, label=p.answer, answers=answers, verdicts=verdicts,
                                     correct=sum(x == "correct" for x in verdicts),
                                     distinct=len(set(checker.keys(answers)) - {None})))
        return out
    finally:
        checker.close()


def summarise(results: list[ProblemResult], ks: list[int]) -> dict:
    """Means over problems: pass@k for each k, distinct answers; verdict counts over samples."""
    if not results:
        raise ValueError("summarise: no problems were evaluated")
    sizes = {len(r.verdicts) for r in results}
    if len(sizes) != 1:
        raise ValueError(f"summarise: every problem needs the same number of samples, got {sorted(sizes)}")
    n = sizes.pop()
    out: dict = {"problems": len(results), "samples_per_problem": n}
    for k in ks:
        out[f"pass@{k}"] = sum(pass_at_k(n, r.correct, k) for r in results) / len(results)
    out["distinct_answers"] = sum(r.distinct for r in results) / len(results)
    out["distinct_answers_max"] = max(r.distinct for r in results)
    out["verdicts"] = dict(Counter(v for r in results for v in r.verdicts).most_common())
    return out


def load_problems(dataset: str, seed: int, count: int, data=None, skip_hint: str = "") -> list:
    """The first `count` problems: of a built-in task's seeded stream, or of the dataset in file
    order (count 0: all of it), so two evaluations of one dataset see the same problems. A
    dataset is read as `data` (a DataConfig: format, field names, bad_rows) says and checked first;
    a refusal of its bad rows says skip_hint (how the caller skips them), else training's way."""
    from itertools import islice

    from jury.data.tasks import BUILTIN_DATASETS
    from jury.data.files import check_dataset, read_problems
    from jury.protocol.config import DataConfig

    if dataset in BUILTIN_DATASETS:
        if count < 1:
            raise ValueError(f"--count must be >= 1 for the {dataset} dataset (it never ends)")
        return list(islice(BUILTIN_DATASETS[dataset](seed), count))
    data = data or DataConfig()
    check_dataset(dataset, data, *([skip_hint] if skip_hint else []))
    problems = read_problems(dataset, data)
    return list(islice(problems, count)) if count > 0 else list(problems)


def default_dataset(run_cfg: dict, data) -> str:
    """The run's data.eval_path, else its dataset when that is a built-in task, else synthetic."""
    from jury.data.tasks import BUILTIN_DATASETS

    if data and data.eval_path:
        return data.eval_path
    return run_cfg.get("dataset") if run_cfg.get("dataset") in BUILTIN_DATASETS else "synthetic"


class Evaluator:
    """eval.every steps: the eval problems through the run's generators, at the version they hold."""

    def __init__(self, cfg, problems: list, prompts: list[str], skipped: int = 0, verifier=None):
        self.cfg, self.problems, self.prompts, self.skipped = cfg, problems, prompts, skipped
        self.verifier = verifier  # the run's VerifierConfig: grade as its workers do

    @classmethod
    def from_config(cls, run, prompt_format, tokenizer=None):
        """The eval problems: data.eval_path, else (a built-in task) a held-out stream of the task
        seeded apart from training's; the first eval.problems of them whose prompt fits."""
        e = run.eval
        path = default_dataset({"dataset": run.dataset}, run.data)
        problems = load_problems(path, run.seed + EVAL_SEED_OFFSET, e.problems, run.data)
        prompts = [prompt_format.render(p.problem) for p in problems]
        fits = [tokenizer is None or len(tokenizer(t)["input_ids"]) <= run.max_prompt_tokens for t in prompts]
        return cls(e, [p for p, ok in zip(problems, fits) if ok], [t for t, ok in zip(prompts, fits) if ok],
                   skipped=fits.count(False), verifier=run.verifier)

    def due(self, step: int) -> bool:
        return self.cfg.every > 0 and (step + 1) % self.cfg.every == 0

    def run(self, generators, version: int, max_new_tokens: int, timeout_s: float) -> dict[str, float]:
        """Sample through the generators (problems dealt round-robin), then score."""
        import ray

        t0 = time.perf_counter()
        e = self.cfg
        share = [list(range(i, len(self.prompts), len(generators))) for i in range(len(generators))]
        refs = [g.evaluate.remote([self.prompts[j] for j in part], e.samples, e.temperature,
                                  e.max_new_tokens or max_new_tokens, e.top_p) for g, part in zip(generators, share)]
        texts: list = [None] * len(self.prompts)
        tokens = 0
        for part, (out, n_tokens) in zip(share, ray.get(refs, timeout=timeout_s)):
            tokens += n_tokens
            for j, t in zip(part, out):
                texts[j] = t
        return {**self.score(texts), "eval/version": float(version), "eval/tokens": float(tokens),
                "eval/s": time.perf_counter() - t0}

    def score(self, texts: list[list[str]]) -> dict[str, float]:
        """eval/pass@1, eval/pass@{samples}, eval/distinct_answers(_max) over the problems' samples."""
        s = summarise(grade(self.problems, texts, verifier=self.verifier), sorted({1, self.cfg.samples}))
        out = {f"eval/{k}": float(v) for k, v in s.items() if k.startswith("pass@") or k.startswith("distinct")}
        out.update({"eval/problems": float(s["problems"]), "eval/skipped_too_long": float(self.skipped)})
        return out


EVAL_SEED_OFFSET = 1_000_003  # synthetic eval problems come from a stream of their own
