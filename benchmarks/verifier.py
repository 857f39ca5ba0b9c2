"""Rule-based math verifiers side by side on HardVerify-Math (TinyV, 250 items).

    python benchmarks/verifier.py                        # ours and math-verify
    python benchmarks/verifier.py --only ours --misses   # and list what we get wrong

Each item has a ground truth, a correct answer that rule-based verifiers tend to
reject (fn_output) and a wrong one (tn_output). Both are wrapped in \\boxed{} and
checked against the ground truth: a verifier should accept the first and reject the
second. One check = extraction + normalisation + comparison, timed one by one on a
single pinned core, with our parse cache cleared before every check (cold). Reports
accepted / rejected counts, checks per second and p50/p99 latency; prints a table and
writes JSON (--json).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import statistics
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def default_data() -> pathlib.Path:
    shared = os.environ.get("JURY_SHARED")
    base = pathlib.Path(shared) if shared else ROOT.parent / "shared"
    return base / "data" / "HardVerify-Math.json"


def ours():
    from jury.verifiers.math import verify as math_verify

    def verify(answer: str, reference: str) -> bool:
        math_verify.clear_caches()
        return math_verify.check(math_verify.extract_answer("\\boxed{" + answer + "}"), reference) == "correct"

    return "jury.math_verify", verify


def theirs():
    import math_verify as mv  # the PyPI package (math-verify), not ours

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)

    def verify(answer: str, reference: str) -> bool:
        gold = mv.parse("\\boxed{" + reference + "}")
        return bool(mv.verify(gold, mv.parse("\\boxed{" + answer + "}")))

    version = getattr(mv, "__version__", None)
    if version is None:
        from importlib.metadata import version as pkg_version

        version = pkg_version("math-verify")
    return f"math-verify {version}", verify


def run(verify, items: list[dict]) -> dict:
    verify(items[0]["fn_output"], items[0]["ground_truth"])  # warm-up: imports, first-use costs
    accepted = rejected = 0
    latencies, misses = [], []
    for item in items:
        for field in ("fn_output", "tn_output"):
            t0 = time.perf_counter()
            ok = verify(item[field], item["ground_truth"])
            latencies.append(time.perf_counter() - t0)
            if field == "fn_output":
                accepted += ok
            else:
                rejected += not ok
            if ok != (field == "fn_output"):
                misses.append({"id": item.get("id"), "field": field, "ground_truth": item["ground_truth"], "answer": item[field]})
    latencies.sort()
    return {
        "accepted": accepted,
        "rejected": rejected,
        "items": len(items),
        "checks": len(latencies),
        "checks_per_s": len(latencies) / sum(latencies),
        "p50_ms": 1e3 * statistics.median(latencies),
        "p99_ms": 1e3 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "misses": misses,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=pathlib.Path, default=default_data())
    p.add_argument("--only", choices=("ours", "math-verify"), help="run one verifier")
    p.add_argument("--core", type=int, default=0, help="CPU core to pin to")
    p.add_argument("--misses", action="store_true", help="print our misclassified items")
    p.add_argument("--json", type=pathlib.Path, default=ROOT / "runs" / "verifier_benchmark.json")
    args = p.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.core})
    items = json.loads(args.data.read_text())
    factories = {"ours": ours, "math-verify": theirs}
    results = {}
    for key, factory in factories.items():
        if args.only in (None, key):
            name, verify = factory()
            results[name] = run(verify, items)

    n = len(items)
    print(f"HardVerify-Math, {n} items, one core (#{args.core})")
    print(f"{'verifier':<22}{'accepted':>10}{'rejected':>10}{'checks/s':>11}{'p50 ms':>9}{'p99 ms':>9}")
    for name, r in results.items():
        counts = f"{r['accepted']:>6}/{n:<3}{r['rejected']:>6}/{n:<3}"
        print(f"{name:<22}{counts}{r['checks_per_s']:>11.0f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}")
    if len(results) == 2:
        a, b = results.values()
        print(f"throughput ratio: {a['checks_per_s'] / b['checks_per_s']:.0f}x")
    if args.misses:
        for m in next(iter(results.values()))["misses"]:
            print(f"  {m['field']}: {m['answer']!r}  vs  {m['ground_truth']!r}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"data": str(args.data), "core": args.core, "results": results}, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
