"""`jury select`: best-of-n selection with an LLM judge (Scaling Generative Verifiers).

Input: JSONL, one problem per line: {"problem": str, "candidates": [str, ...],
"answer": optional ground truth}. For each problem the judge model picks one
candidate by GenSelect knockout ("tournament"), LLM-as-a-judge ("judge") or the
hybrid; the output counts the LLM calls per problem, as the paper does, and, where
labels are given, how often the chosen candidate is correct.

    jury select --model JUDGE_FOLDER --input cands.jsonl --method hybrid [--json out.json]
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict

from jury.data.files import iter_jsonl
from jury.verifiers.judges import SELECTION_METHODS, JudgeConfig, select_best
from jury.verifiers.math.verify import check, extract_answer


def read_items(path: str) -> list[dict]:
    items = []
    for lineno, row in iter_jsonl(path):
        cands = row.get("candidates") if isinstance(row, dict) else None
        if not isinstance(row, dict) or not isinstance(row.get("problem"), str) or not (
                isinstance(cands, list) and cands and all(isinstance(c, str) for c in cands)):
            raise ValueError(f'{path}:{lineno}: expected {{"problem": str, "candidates": [str, ...]}}')
        items.append(row)
    if not items:
        raise ValueError(f"{path}: no problems")
    return items


def select_all(client, items: list[dict], method: str, cfg: JudgeConfig, seed: int = 0) -> dict:
    """Selections and the paper's cost measure (LLM calls per problem)."""
    rows = []
    for i, item in enumerate(items):
        res = select_best(client, item["problem"], item["candidates"], method, cfg, seed=seed + i)
        row = {"problem": i, "index": res.index, "llm_calls": res.llm_calls, "unparsable": res.unparsable}
        if "answer" in item:
            row["correct"] = check(extract_answer(item["candidates"][res.index]), str(item["answer"])) == "correct"
        rows.append(row)
    labelled = [r for r in rows if "correct" in r]
    return {"method": method, "problems": len(rows),
            "llm_calls_per_problem": sum(r["llm_calls"] for r in rows) / len(rows),
            "accuracy": sum(r["correct"] for r in labelled) / len(labelled) if labelled else None,
            "judge_config": asdict(cfg), "selections": rows}


def _judge_model(name: str) -> str:
    """A local model built or reused, a folder checked for its config.json now (not by the engine,
    minutes later), or a hub name ("org/model") passed on for vLLM to fetch where it can."""
    from pathlib import Path

    from jury.models.registry import is_local, resolve_model

    folder = Path(name).exists() or name.startswith(("/", ".", "~")) or name.count("/") > 1
    return resolve_model(name) if is_local(name) or folder else name


def _run(args) -> int:
    try:
        items = read_items(args.input)
        cfg = JudgeConfig(n_judgements=args.judgements, n_survivors=args.survivors,
                          max_tokens=args.max_tokens, temperature=args.temperature)
        model = _judge_model(args.model)
    except (OSError, ValueError) as e:
        print(f"jury select: {e}", file=sys.stderr)
        return 2
    from jury.cluster.llm_client import LocalLLMClient

    client = LocalLLMClient(model, max_model_len=args.max_model_len)
    try:
        out = select_all(client, items, args.method, cfg)
    finally:
        client.close()
    print(f"method {out['method']}: {out['problems']} problems, "
          f"{out['llm_calls_per_problem']:.1f} LLM calls per problem"
          + (f", accuracy {out['accuracy']:.3f}" if out["accuracy"] is not None else ""))
    for r in out["selections"]:
        print(f"  problem {r['problem']}: candidate {r['index']} ({r['llm_calls']} calls)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


def add_command(subparsers) -> None:
    p = subparsers.add_parser("select", help="best-of-n selection by an LLM judge (tournament, judge, hybrid)")
    p.add_argument("--model", required=True, help="the judge model (a Hugging Face folder)")
    p.add_argument("--input", required=True, help='JSONL: {"problem", "candidates": [...], "answer"?}')
    p.add_argument("--method", choices=sorted(SELECTION_METHODS), default="tournament")
    p.add_argument("--judgements", type=int, default=JudgeConfig.n_judgements)
    p.add_argument("--survivors", type=int, default=JudgeConfig.n_survivors, help="hybrid: tournament down to this many")
    p.add_argument("--max-tokens", type=int, default=JudgeConfig.max_tokens)
    p.add_argument("--temperature", type=float, default=JudgeConfig.temperature)
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--json", default="")
    p.set_defaults(func=_run)
