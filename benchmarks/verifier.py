"""Rule-based math verifiers side by side: HardVerify-Math and our equivalence suite.

    python benchmarks/verifier.py                        # ours and math-verify
    python benchmarks/verifier.py --only ours --misses   # and list what we get wrong
    python benchmarks/verifier.py --only ours --accept-rounded   # ours, rounded decimals accepted
    python benchmarks/verifier.py --unanchored           # and what verifier.unanchored costs and buys

HardVerify-Math (TinyV, 250 items): each item has a ground truth, a correct answer
that rule-based verifiers tend to reject (fn_output) and a wrong one (tn_output). Both
are wrapped in \\boxed{} and checked against the ground truth: a verifier should
accept the first and reject the second.

The equivalence suite (tests/verifiers/math/equivalence_cases.py, written here) holds
cases of the kinds of wrong accepts and wrong rejects found on outside corpora, each
labelled; a bare answer is wrapped in \\boxed{}, a whole response is read as written,
and a reference holding \\boxed{} is read as written too. Reported per kind and as
right accepts / right rejects.

One check = extraction + normalisation + comparison, timed one by one on a single
pinned core, with our parse cache cleared before every check (cold). Reports checks
per second and p50/p99 latency over HardVerify (wall clock), and checks per CPU second,
which a busy shared machine disturbs less; prints tables and writes JSON (--json).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import pathlib
import statistics
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUITE = ROOT / "tests" / "verifiers" / "math" / "equivalence_cases.py"


def default_data() -> pathlib.Path:
    shared = os.environ.get("JURY_SHARED")
    base = pathlib.Path(shared) if shared else ROOT.parent / "shared"
    return base / "data" / "HardVerify-Math.json"


def load_suite(path: pathlib.Path = SUITE):
    """The suite module: CASES, and NO_ANCHOR_CASES (responses without a box or an answer statement)."""
    spec = importlib.util.spec_from_file_location("equivalence_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def boxed(text: str) -> str:
    return text if "\\boxed" in text else "\\boxed{" + text + "}"


def ours(accept_rounded: bool = False, unanchored: str = "no_answer"):
    from jury.verifiers.math import verify as math_verify

    def verify(response: str, reference: str) -> bool:
        math_verify.clear_caches()
        # as the verifier worker extracts for a check: with the reference's number of parts
        answer = math_verify.extract_answer(response, math_verify.reference_parts(reference), unanchored)
        return math_verify.check(answer, reference, accept_rounded=accept_rounded) == "correct"

    name = "jury.math_verify" + (" (rounded)" if accept_rounded else "") + (f" ({unanchored})" if unanchored != "no_answer" else "")
    return name, verify


def theirs():
    import math_verify as mv  # the PyPI package (math-verify), not ours

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)

    def verify(response: str, reference: str) -> bool:
        return bool(mv.verify(mv.parse(boxed(reference)), mv.parse(response)))

    version = getattr(mv, "__version__", None)
    if version is None:
        from importlib.metadata import version as pkg_version

        version = pkg_version("math-verify")
    return f"math-verify {version}", verify


def run(verify, items: list[dict]) -> dict:
    """HardVerify-Math: accepted fn_output, rejected tn_output, and the latency of each check."""
    verify(boxed(items[0]["fn_output"]), items[0]["ground_truth"])  # warm-up: imports, first-use costs
    accepted = rejected = 0
    latencies, misses = [], []
    cpu0 = time.process_time()
    for item in items:
        for field in ("fn_output", "tn_output"):
            t0 = time.perf_counter()
            ok = verify(boxed(item[field]), item["ground_truth"])
            latencies.append(time.perf_counter() - t0)
            if field == "fn_output":
                accepted += ok
            else:
                rejected += not ok
            if ok != (field == "fn_output"):
                misses.append({"id": item.get("id"), "field": field, "ground_truth": item["ground_truth"], "answer": item[field]})
    cpu_s = time.process_time() - cpu0
    latencies.sort()
    return {
        "accepted": accepted,
        "rejected": rejected,
        "items": len(items),
        "checks": len(latencies),
        "checks_per_s": len(latencies) / sum(latencies),
        "cpu_checks_per_s": len(latencies) / cpu_s,  # steadier than wall time on a shared machine
        "p50_ms": 1e3 * statistics.median(latencies),
        "p99_ms": 1e3 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "misses": misses,
    }


def run_suite(verify, cases: list) -> dict:
    """The equivalence suite: right accepts and right rejects, overall and per kind."""
    kinds: dict[str, list[int]] = {}
    right_accepts = right_rejects = 0
    misses = []
    for case in cases:
        text = case.text if case.is_response else boxed(case.text)
        ok = verify(text, case.reference)
        right = ok == case.expected
        right_accepts += right and case.expected
        right_rejects += right and not case.expected
        kinds.setdefault(case.kind, [0, 0])
        kinds[case.kind][0] += right
        kinds[case.kind][1] += 1
        if not right:
            misses.append({"kind": case.kind, "text": case.text, "reference": case.reference, "expected": case.expected})
    return {
        "right_accepts": right_accepts,
        "should_accept": sum(c.expected for c in cases),
        "right_rejects": right_rejects,
        "should_reject": sum(not c.expected for c in cases),
        "kinds": kinds,
        "misses": misses,
    }


# How a response gives an answer without an anchor (no box, no "the answer is" / "Final Answer:")
UNANCHORED_TEMPLATES = {"inline": "So we get ${}$.", "plain": "Putting it all together, {}."}


def run_unanchored(verify, items: list[dict], suite) -> dict:
    """What verifier.unanchored=last_expression costs and buys: accepts of responses that
    give their answer without an anchor. Wrong accepts: HardVerify's wrong answers
    (tn_output) in each template, its questions read as responses that answer nothing,
    the suite's wrong answers in each template and its uncommitted responses
    (NO_ANCHOR_CASES); right accepts: the correct ones (fn_output, the suite's)."""
    out = {"hardverify": {}, "suite": {}}
    for name, template in UNANCHORED_TEMPLATES.items():
        out["hardverify"][f"{name}: fn_output accepted"] = sum(verify(template.format(x["fn_output"]), x["ground_truth"]) for x in items)
        out["hardverify"][f"{name}: tn_output accepted"] = sum(verify(template.format(x["tn_output"]), x["ground_truth"]) for x in items)
    out["hardverify"]["question accepted"] = sum(verify(x["question"], x["ground_truth"]) for x in items)
    bare = [c for c in suite.CASES if not c.is_response]
    for name, template in UNANCHORED_TEMPLATES.items():
        verdicts = [(verify(template.format(c.text), c.reference), c.expected) for c in bare]
        out["suite"][f"{name}: right accepts"] = sum(ok and e for ok, e in verdicts)
        out["suite"][f"{name}: wrong accepts"] = sum(ok and not e for ok, e in verdicts)
    verdicts = [(verify(c.text, c.reference), c.expected) for c in suite.NO_ANCHOR_CASES]
    out["suite"]["no-anchor cases: right accepts"] = sum(ok and e for ok, e in verdicts)
    out["suite"]["no-anchor cases: wrong accepts"] = sum(ok and not e for ok, e in verdicts)
    out["sizes"] = {"hardverify": len(items), "suite_bare": len(bare), "suite_bare_wrong": sum(not c.expected for c in bare),
                    "no_anchor": len(suite.NO_ANCHOR_CASES), "no_anchor_wrong": sum(not c.expected for c in suite.NO_ANCHOR_CASES)}
    return out


def print_unanchored(results: dict) -> None:
    sizes = next(iter(results.values()))["sizes"]
    print(f"\nResponses without an anchor (HardVerify: {sizes['hardverify']} items; suite: {sizes['suite_bare']} bare "
          f"answers, {sizes['suite_bare_wrong']} wrong; {sizes['no_anchor']} no-anchor cases, {sizes['no_anchor_wrong']} wrong): accepts")
    names = list(results)
    print(f"{'':<44}" + "".join(f"  {name:>34}" for name in names))
    for part in ("hardverify", "suite"):
        for key in results[names[0]][part]:
            print(f"{part + ' ' + key:<44}" + "".join(f"  {results[name][part][key]:>34}" for name in names))


def print_tables(hard: dict, suite: dict, n: int, core: int) -> None:
    print(f"HardVerify-Math, {n} items, one core (#{core})")
    print(f"{'verifier':<27}{'accepted':>10}{'rejected':>10}{'checks/s':>11}{'p50 ms':>9}{'p99 ms':>9}{'cpu checks/s':>14}")
    for name, r in hard.items():
        counts = f"{r['accepted']:>6}/{n:<3}{r['rejected']:>6}/{n:<3}"
        timing = f"{r['checks_per_s']:>11.0f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}{r['cpu_checks_per_s']:>14.0f}"
        print(f"{name:<27}{counts}{timing}")
    if len(hard) == 2:
        a, b = hard.values()
        print(f"throughput ratio: {a['checks_per_s'] / b['checks_per_s']:.0f}x")
    names = list(suite)
    first = next(iter(suite.values()))
    total = first["should_accept"] + first["should_reject"]
    print(f"\nEquivalence suite, {total} cases ({first['should_accept']} to accept, {first['should_reject']} to reject): right / cases")
    print(f"{'kind':<24}" + "".join(f"{name:>22}" for name in names))
    for kind, (_, count) in first["kinds"].items():
        print(f"{kind:<24}" + "".join(f"{suite[name]['kinds'][kind][0]:>19}/{count:<2}" for name in names))
    for label, key, of in (("right accepts", "right_accepts", "should_accept"), ("right rejects", "right_rejects", "should_reject")):
        print(f"{label:<24}" + "".join(f"{suite[name][key]:>18}/{suite[name][of]:<3}" for name in names))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=pathlib.Path, default=default_data())
    p.add_argument("--only", choices=("ours", "math-verify"), help="run one verifier")
    p.add_argument("--core", type=int, default=0, help="CPU core to pin to")
    p.add_argument("--misses", action="store_true", help="print our misclassified items")
    p.add_argument("--accept-rounded", action="store_true", help="ours accepts rounded decimal answers (0.333 for 1/3)")
    p.add_argument("--unanchored", action="store_true",
                   help="also measure verifier.unanchored: ours at both settings (and math-verify) on answers given without an anchor")
    p.add_argument("--json", type=pathlib.Path, default=ROOT / "runs" / "verifier_benchmark.json")
    args = p.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.core})
    items = json.loads(args.data.read_text())
    module = load_suite()
    cases = module.CASES
    factories = {"ours": lambda: ours(args.accept_rounded), "math-verify": theirs}
    hard, suite, unanchored = {}, {}, {}
    for key, factory in factories.items():
        if args.only in (None, key):
            name, verify = factory()
            hard[name] = run(verify, items)
            suite[name] = run_suite(verify, cases)
            if args.unanchored:
                if key == "ours":
                    unanchored[name] = run_unanchored(verify, items, module)
                    name, verify = ours(args.accept_rounded, "last_expression")
                unanchored[name] = run_unanchored(verify, items, module)

    print_tables(hard, suite, len(items), args.core)
    if unanchored:
        print_unanchored(unanchored)
    if args.misses:
        name = next(iter(hard))
        print(f"\n{name} misses on HardVerify-Math:")
        for m in hard[name]["misses"]:
            print(f"  {m['field']}: {m['answer']!r}  vs  {m['ground_truth']!r}")
        print(f"{name} misses on the equivalence suite:")
        for m in suite[name]["misses"]:
            print(f"  [{m['kind']}] expected {m['expected']}: {m['text']!r}  vs  {m['reference']!r}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    payload = {"data": str(args.data), "core": args.core, "hardverify": hard, "equivalence_suite": suite,
               "unanchored": unanchored}
    args.json.write_text(json.dumps(payload, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
