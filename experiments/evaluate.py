"""`jury eval`: pass@k and answer diversity of a checkpoint on a problem set.

    problems ──vLLM LLM.generate, n samples each──> texts ──extract_answer──> answers
       answers ──quick_check, then check in a pool with a hard timeout──> c correct of n
       (n, c) ──pass_at_k──> pass@k        answers ──answer_key──> distinct answers

Generation runs in this process through vLLM's offline `LLM` class: an evaluation
needs no actors, queues or weight syncs. vLLM starts its engine core with spawn, so
whatever script calls `evaluate` needs the `if __name__ == "__main__":` guard (the
`jury` entry point and `python -m jury.experiments.evaluate` have it).

When the checkpoint is a run's `final/` folder, the run's config.yaml beside it gives
the defaults: the training model's tokenizer (the learner saves weights only), the
sampling settings the policy was trained with, and its data section: the evaluation
file (data.eval_path), its field names, and the prompt template and chat template, so
problems are asked exactly as in training.
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from jury.cluster.evaluation import (ProblemResult, default_dataset, grade, load_problems, pass_at_k,  # noqa: F401
                                     summarise)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")


@dataclass(frozen=True)
class Sampling:
    n: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    max_model_len: int | None = None  # None: the model's own
    dtype: str = "auto"
    seed: int = 0


def data_config_of(run_cfg: dict):
    """The training run's data section (field names, template, chat template); defaults without one."""
    from jury.protocol.config import DataConfig

    try:
        return DataConfig(**run_cfg.get("data", {}))
    except (TypeError, ValueError) as e:
        raise ValueError(f"the run's config.yaml: data: {e}") from None


def verifier_config_of(run_cfg: dict):
    """The training run's grading settings (the verifier section's accept_rounded and unanchored), so
    that `jury eval` of its checkpoint grades as its in-training eval/* did; defaults without a run."""
    from jury.protocol.config import VerifierConfig

    section = run_cfg.get("verifier") or {}
    try:
        return VerifierConfig(**{k: section[k] for k in ("accept_rounded", "unanchored") if k in section})
    except (TypeError, ValueError) as e:
        raise ValueError(f"the run's config.yaml: verifier: {e}") from None


def run_config_of(checkpoint: Path) -> dict:
    """The training run's config when the checkpoint is a run's `final/` folder, else {}."""
    from jury.protocol.config_load import read_yaml

    path = checkpoint.parent / "config.yaml"
    if not checkpoint.is_dir() or not path.exists():
        return {}
    cfg = read_yaml(str(path))  # broken YAML: a ConfigError naming the file
    # some other program's config.yaml beside a model folder is not a run's
    is_run = isinstance(cfg, dict) and isinstance(cfg.get("generator"), dict) and "model" in cfg
    return cfg if is_run else {}


def resolve_model(checkpoint: str, tokenizer: str | None, run_cfg: dict) -> tuple[str, str]:
    """(model folder, tokenizer folder); a local model's name (tiny, tiny-chat, tiny-chain) is its folder."""
    from jury.models.registry import build_local_model, is_local

    def local(name: str) -> str:
        return str(build_local_model(name, progress=False)) if is_local(name) else name

    model = local(checkpoint)
    if not (Path(model) / "config.json").exists():
        raise FileNotFoundError(f"checkpoint: {model} is not a Hugging Face model folder (no config.json)")
    if tokenizer:
        return model, local(tokenizer)
    if any((Path(model) / f).exists() for f in TOKENIZER_FILES):
        return model, model
    if run_cfg.get("model"):
        return model, local(run_cfg["model"])
    raise FileNotFoundError(f"checkpoint: {model} has no tokenizer and no run config.yaml beside it; "
                            f"pass --tokenizer")


@contextmanager
def _stdout_to_stderr():
    """vLLM logs to stdout, from this process and the engine's children (which inherit the
    file descriptor); moving fd 1 keeps stdout for the result, so `--json` output parses."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def generate_vllm(model: str, tokenizer: str, prompts: list[str], s: Sampling,
                  progress: bool = True) -> tuple[list[list[str] | None], dict]:
    """n completions per prompt from an in-process vLLM engine; None for a prompt too long to fit."""
    # the engine core reads these at start; a caller's own settings win
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with _stdout_to_stderr():
        from vllm import LLM, SamplingParams

        from jury.actors.cpu_engine import in_process_cpu_engine

        t0 = time.perf_counter()
        with in_process_cpu_engine() as inline:  # on the CPU: no engine processes to start
            llm = LLM(model=model, tokenizer=tokenizer, dtype=s.dtype, max_model_len=s.max_model_len, seed=s.seed,
                      enforce_eager=True)
        try:
            start_s = time.perf_counter() - t0
            limit = llm.llm_engine.model_config.max_model_len - s.max_new_tokens
            tok = llm.get_tokenizer()
            # vLLM refuses a whole batch when one prompt does not fit, so those are left out and counted
            fits = [len(tok(p)["input_ids"]) <= limit for p in prompts]
            params = SamplingParams(n=s.n, temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_new_tokens)
            t1 = time.perf_counter()
            outs = iter(llm.generate([p for p, ok in zip(prompts, fits) if ok], params, use_tqdm=progress))
            texts = [[c.text for c in next(outs).outputs] if ok else None for ok in fits]
            timing = {"engine_start_s": start_s, "generate_s": time.perf_counter() - t1, "engine_inline": inline}
        finally:
            # vLLM's default grace of 5 s is too short on a loaded 2-core machine: it then force-kills
            llm.llm_engine.engine_core.shutdown(timeout=30)
    return texts, timing


Generate = Callable[[str, str, list, Sampling], tuple[list, dict]]


def evaluate(checkpoint: str, problems: list, sampling: Sampling, ks: list[int], *, tokenizer: str | None = None,
             check_timeout_s: float = 5.0, generate: Generate | None = None, data=None, verifier=None) -> dict:
    """The summary (pass@k, distinct answers, verdicts, settings) and per-problem results.
    Prompts are made as the feeder makes them in training: `data` (the run's DataConfig) gives
    the template and chat template; without it, the problem and a newline. `verifier` (the run's
    VerifierConfig) grades as the run did; without it, the defaults."""
    from jury.data.problems import PROMPT_SUFFIX

    bad = [k for k in ks if not 1 <= k <= sampling.n]
    if bad:
        raise ValueError(f"pass@k needs 1 <= k <= n={sampling.n}, got k={bad}")
    model, tok = resolve_model(checkpoint, tokenizer, run_config_of(Path(checkpoint)))
    if data is None:
        prompts = [p.problem + PROMPT_SUFFIX for p in problems]
    else:
        from transformers import AutoTokenizer

        from jury.data.prompts import PromptFormat

        fmt = PromptFormat.from_config(data, AutoTokenizer.from_pretrained(tok), model=tok)
        prompts = [fmt.render(p.problem) for p in problems]
    texts, timing = (generate or generate_vllm)(model, tok, prompts, sampling)
    kept = [i for i, t in enumerate(texts) if t is not None]
    if not kept:
        raise ValueError(f"all {len(problems)} prompts are too long for max_model_len with "
                         f"max_new_tokens={sampling.max_new_tokens}")
    results = grade([problems[i] for i in kept], [texts[i] for i in kept], timeout_s=check_timeout_s,
                    verifier=verifier)
    summary = summarise(results, ks)
    summary.update(skipped_too_long=len(problems) - len(kept), checkpoint=model, tokenizer=tok,
                   sampling=asdict(sampling), **timing)
    return {"summary": summary, "problems": [asdict(r) for r in results]}


def sampling_from(args, run_cfg: dict) -> Sampling:
    """Flags first, then the training run's generator settings, then the defaults."""
    gen = run_cfg.get("generator", {})
    inherited = {"temperature": gen.get("temperature"), "top_p": gen.get("top_p"),
                 "max_new_tokens": gen.get("max_new_tokens"), "max_model_len": run_cfg.get("max_model_len"),
                 "dtype": gen.get("dtype")}
    given = {"temperature": args.temperature, "top_p": args.top_p, "max_new_tokens": args.max_new_tokens,
             "max_model_len": args.max_model_len, "dtype": args.dtype}
    chosen = {k: given[k] if given[k] is not None else inherited[k] for k in given}
    return replace(Sampling(n=args.n, seed=args.seed), **{k: v for k, v in chosen.items() if v is not None})


def table(summary: dict) -> str:
    s = summary["sampling"]
    rows = [("checkpoint", summary["checkpoint"]),
            ("problems", f"{summary['problems']} ({summary['skipped_too_long']} too long, left out)"),
            ("sampling", (f"n={s['n']} temperature={s['temperature']} top_p={s['top_p']} "
                          f"max_new_tokens={s['max_new_tokens']} seed={s['seed']}"))]
    rows += [(k, f"{v:.4f}") for k, v in summary.items() if k.startswith("pass@")]
    rows.append(("distinct answers", (f"{summary['distinct_answers']:.2f} per problem "
                                      f"(max {summary['distinct_answers_max']})")))
    rows.append(("verdicts", ", ".join(f"{k} {v}" for k, v in summary["verdicts"].items())))
    times = [(k.removesuffix("_s").replace("_", " "), summary[k]) for k in ("engine_start_s", "generate_s")
             if k in summary]
    if times:
        rows.append(("time", ", ".join(f"{k} {v:.1f} s" for k, v in times)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _ks(text: str) -> list[int]:
    try:
        ks = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise ValueError(f"-k takes whole numbers separated by commas (e.g. 1,4,8), got {text!r}") from None
    if not ks:
        raise ValueError(f"-k takes whole numbers separated by commas (e.g. 1,4,8), got {text!r}")
    return ks


def _run(args) -> int:
    try:
        if args.n < 1:
            raise ValueError(f"-n (samples per problem) must be at least 1, got {args.n}")
        run_cfg = run_config_of(Path(args.checkpoint))
        sampling = sampling_from(args, run_cfg)
        ks = _ks(args.k) if args.k else sorted({1, sampling.n})
        data = data_config_of(run_cfg) if run_cfg else None
        verifier = verifier_config_of(run_cfg) if run_cfg else None
        dataset = args.dataset or default_dataset(run_cfg, data)
        read_as = replace(data or data_config_of({}), bad_rows="skip") if args.skip_bad_rows else data
        problems = load_problems(dataset, args.seed, args.count, read_as,
                                 skip_hint="pass --skip-bad-rows to evaluate without them")
        result = evaluate(args.checkpoint, problems, sampling, ks, tokenizer=args.tokenizer,
                          check_timeout_s=args.check_timeout_s, data=data, verifier=verifier)
    except (ValueError, OSError) as e:
        print(f"jury eval: {e}", file=sys.stderr)
        return 2
    result["summary"]["dataset"] = {"name": dataset, "seed": args.seed, "count": args.count}
    if args.json == "-":
        print(json.dumps(result, indent=2))
        return 0
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print(table(result["summary"]))
    return 0


def add_command(subparsers) -> None:
    p = subparsers.add_parser("eval", help="pass@k and distinct answers of a checkpoint on a dataset")
    p.add_argument("checkpoint", help='a Hugging Face model folder (e.g. a run\'s final/), or "tiny"')
    p.add_argument("--dataset", default=None,
                   help='"synthetic", or a JSONL or Parquet file or `datasets` folder, read with the run\'s '
                        'data.* field names (default: the run\'s data.eval_path, else synthetic)')
    p.add_argument("--count", type=int, default=128, help="problems (a dataset: its first COUNT, 0 = all)")
    p.add_argument("--seed", type=int, default=0, help="synthetic problem stream and sampling seed")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="leave out the dataset's bad rows, counted in a warning (default: refuse the file)")
    p.add_argument("-n", type=int, default=8, help="samples per problem")
    p.add_argument("-k", default=None, help="comma-separated k for pass@k (default: 1 and n)")
    p.add_argument("--temperature", type=float, default=None, help="default: the run's, else 1.0")
    p.add_argument("--top-p", type=float, default=None, help="default: the run's, else 1.0")
    p.add_argument("--max-new-tokens", type=int, default=None, help="default: the run's, else 512")
    p.add_argument("--max-model-len", type=int, default=None, help="default: the run's, else the model's")
    p.add_argument("--dtype", default=None, help="default: the run's, else auto")
    p.add_argument("--tokenizer", default=None, help="default: the checkpoint's, else the run's model's")
    p.add_argument("--check-timeout-s", type=float, default=5.0, help="hard limit per answer check")
    p.add_argument("--json", nargs="?", const="-", default=None,
                   help="write the JSON result to PATH (alone: print JSON instead of the table)")
    p.set_defaults(func=_run)


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="jury")
    add_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["eval", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":  # vLLM's engine core starts with spawn, which re-imports __main__
    sys.exit(main())
