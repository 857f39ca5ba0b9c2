"""The Lean proof gate against the public exploit corpora, layer by layer, without Lean.

    python benchmarks/lean_corpora.py                       # corpora from ../shared/data/lean-corpora
    python benchmarks/lean_corpora.py --corpora PATH --json out.json --list
    python benchmarks/lean_corpora.py --lean-cmd "lake env repl" --lean-cwd ~/mathlib-project   # real Lean

Every corpus file becomes what the gate sees: a target statement (from the corpus's own
challenge or reference file) and a prover reply (the submission file in a fenced Lean
block), the target renamed to `test_problem`, the gate's convention. The reply then goes
the gate's way: extraction, the screen, and the REPL chain, answered here by the protocol
double (tests/verifiers/lean/lean_repl_double.py), which simulates Lean by simple rules.
The table counts where each file stopped; `needs Lean` marks files the double cannot
judge (the statement needs the challenge's own declarations, or the corpus leaves the
outcome open). The same is done for our own honest proofs and exploit spellings
(tests/verifiers/lean/cases.py), and checks per second are timed end to end. `behind`
counts, of the exploits the screen stopped, those the Lean-side layers alone (on the
double) also stop: the second line of defence.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import re
import shlex
import sys
import time
from dataclasses import asdict, dataclass

ROOT = pathlib.Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests" / "verifiers" / "lean"
DOUBLE = TESTS / "lean_repl_double.py"
TARGET = "test_problem"
LAYERS = ("extract", "screen", "statement", "lean", "axioms", "type", "replay", "error", "accepted")


def default_corpora() -> pathlib.Path:
    shared = os.environ.get("JURY_SHARED")
    return (pathlib.Path(shared) if shared else ROOT.parent / "shared") / "data" / "lean-corpora"


@dataclass
class Case:
    corpus: str
    name: str
    expected: str            # refuse | accept | lean (the corpus leaves it open) | n/a (out of scope)
    why: str                 # how the expectation or the scope was derived
    statement: str | None = None  # "theorem test_problem <signature>"
    reply: str | None = None      # the prover's reply: the submission in a fenced block
    opens: str = ""               # the challenge's own `open` lines, added to the header
    context: bool = False         # the statement names the challenge's own declarations


# ---------------------------------------------------------------- reading trusted challenge files
_DECL = re.compile(r"^\s*(?:@\[[^\]]*\]\s*)?(?:noncomputable\s+|private\s+|protected\s+)*"
                   r"(theorem|lemma|def|axiom|abbrev|opaque)\s+([^\s(:{\[]+)", re.M)


def declarations(text: str) -> list[tuple[str, str, str]]:
    """(kind, last name component, signature) of each declaration in a trusted file."""
    out = []
    for m in _DECL.finditer(text):
        rest = text[m.end():]
        cut = _top_level_assign(rest)
        sig = rest[:cut] if cut is not None else rest.split("\n\n")[0]
        out.append((m.group(1), m.group(2).split(".")[-1].strip("«»"), " " + " ".join(sig.split())))
    return out


def _top_level_assign(text: str) -> int | None:
    depth, i = 0, 0
    while i < len(text) - 1:
        c = text[i]
        if text.startswith("--", i):
            i = text.find("\n", i) % (len(text) + 1)
            continue
        depth += c in "([{⟨" and 1 or c in ")]}⟩" and -1 or 0
        if depth == 0 and text.startswith(":=", i):
            return i
        if depth == 0 and text.startswith("\n\n", i):
            return None
        i += 1
    return None


def rename(text: str, old: str, new: str = TARGET) -> str:
    return re.sub(r"(?<![\w'!?])" + re.escape(old) + r"(?![\w'!?])", new, text)


def fenced(text: str) -> str:
    return f"```lean4\n{text}\n```"


def opens_of(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if re.match(r"open\s+(?!.*\bin\s*$)", ln))


def pose(case: Case, challenge: str, submission: str, target: str | None = None) -> Case:
    """Fill statement and reply from a challenge (target's signature) and a submission."""
    decls = declarations(challenge)
    named = [d for d in decls if d[1] == target] if target else [d for d in decls if d[0] != "def"] or decls
    if not named:
        case.expected, case.why = "n/a", case.why + "; no target declaration found"
        return case
    kind, name, sig = named[-1]
    case.statement = f"theorem {TARGET}{sig}"
    case.reply = fenced(rename(submission, name))
    case.opens = opens_of(challenge)
    return case


# ---------------------------------------------------------------- the corpora and their expectations
# LeanParanoia: tests/lean_exploit_files/<Kind>/<Name>.lean are exploits by kind, except
# Valid/ (the repo's own valid examples) and Transitive/Level*_*Clean/UsesClean/UsesBoth
# (commented "Clean ... no exploits" / "valid dependency"). tests/benchmark/references/
# holds the challenge each exploit answers (its target with `sorry`); files without one are
# helper modules of multi-file tests (BadLib, DeepAxiom_L0, DeepSorry_L0, Valid/Helper).
PARANOIA_VALID = {"Transitive/Level0_Clean.lean", "Transitive/Level1_UsesClean.lean",
                  "Transitive/Level2_UsesBoth.lean"}
# Targets whose statement names declarations of the challenge itself (checked by hand):
# the gate poses self-contained statements only, so Lean would refuse them at the statement.
PARANOIA_CONTEXT = {"AuxiliaryShadowing", "ConstructorIntegrity", "RecursorIntegrity",
                    "Partial/NonTerminating", "SourcePatterns/LocalNotation", "SourcePatterns/ScopedNotation",
                    "Valid/Helper", "Valid/UnsafeReducibility", "Valid/Dependencies", "Transitive/Level"}


def paranoia_cases(root: pathlib.Path) -> list[Case]:
    base, refs = root / "LeanParanoia/tests/lean_exploit_files", root / "LeanParanoia/tests/benchmark/references"
    cases = []
    for path in sorted(base.rglob("*.lean")):
        rel = str(path.relative_to(base))
        text = path.read_text()
        valid = rel.startswith("Valid/") or rel in PARANOIA_VALID
        ref = refs / rel
        case = Case("LeanParanoia", rel, "accept" if valid else "refuse",
                    "Valid/ or commented clean" if valid else "exploit directory")
        case.context = any(rel.startswith(p) for p in PARANOIA_CONTEXT)
        if ref.exists():
            challenge = ref.read_text()
            target = "exploit_theorem" if "exploit_theorem" in challenge else None
            cases.append(pose(case, challenge, text, target))
        elif valid:
            cases.append(pose(case, text, text))
        else:
            case.why += "; helper module of a multi-file test (no reference): submitted as is"
            cases.append(pose(case, text, text))
    return cases


# SafeVerify: SafeVerifyTest/<Case>/Target.lean is the challenge; the submission's file name
# is the expectation (Bad: refuse, Good: accept, Maybe: left open by the repo). Solution.lean
# answers a disproof (`foo.disproof`, SafeVerify's --disproofs mode) and Def/ a definition
# target: neither is a theorem the gate poses.
def safeverify_cases(root: pathlib.Path) -> list[Case]:
    base = root / "SafeVerify/SafeVerifyTest"
    cases = []
    for path in sorted(base.rglob("*.lean")):
        if path.name == "Target.lean":
            continue
        rel = str(path.relative_to(base))
        challenge = (path.parent / "Target.lean").read_text()
        expected = {"Bad": "refuse", "Good": "accept", "Maybe": "lean"}.get(path.stem, "n/a")
        case = Case("SafeVerify", rel, expected, f"file named {path.stem}")
        if path.parent.name in ("Def", "NonComp", "DisproofValid"):
            case.expected, case.why = "n/a", "definition target or disproof mode"
            cases.append(case)
            continue
        # ImpBy names its own definition; whether an instance changes the elaborated type is Lean's call
        case.context = path.parent.name in ("ImpBy", "OverwrittenTypeclass")
        cases.append(pose(case, challenge, path.read_text()))
    for name in ("Challenge.lean", "Solution.lean"):
        cases.append(Case("SafeVerify", name, "n/a", "top-level disproof example"))
    return cases


# comparator: tests/projects/<case>/test.json gives the expected exit code (0 accept,
# 1 refuse), config.json the targets; definition holes (definition_names) are not a
# theorem the gate poses. Prelude challenges redefine the core, so their statements
# cannot be posed in the gate's header either.
COMPARATOR_CONTEXT = {"quot_mismatch", "char_ofnat_issue", "primitive_issue", "olean_issue"}


def comparator_cases(root: pathlib.Path) -> list[Case]:
    base = root / "comparator/tests/projects"
    cases = []
    for project in sorted(p for p in base.iterdir() if p.is_dir()):
        config = json.loads((project / "config.json").read_text())
        code = json.loads((project / "test.json").read_text())["exit_code"]
        case = Case("comparator", project.name, "accept" if code == 0 else "refuse", f"test.json exit_code {code}")
        if config.get("definition_names"):
            case.expected, case.why = "n/a", "definition hole"
            cases.append(case)
            continue
        module = config["challenge_module"].replace("«", "").replace("»", "").split(".")
        challenge = (project.joinpath(*module[:-1]) / (module[-1] + ".lean"))
        if not challenge.exists():
            challenge = project / "Challenge" / "12.34" / "5.lean"
        target = config["theorem_names"][0].split(".")[-1].strip("«»")
        case.context = project.name in COMPARATOR_CONTEXT
        cases.append(pose(case, challenge.read_text(), (project / "Solution.lean").read_text(), target))
    return cases


# lean4checker: Lean4CheckerTests/ holds modules its TestDriver runs; AddFalse,
# AddFalseConstructor and ReplaceAxiom are the environment hacks it must reject (their
# expected-failure outputs), PrivateConflict* must replay (multi-module, module system),
# QuotEq tests replay internals and OpenPrivate is a library. The two hacks that leave no
# theorem get one line using what they forged, so the gate has a target to judge.
L4C_USE = {"AddFalse.lean": "theorem test_problem : False := false",
           "AddFalseConstructor.lean": "theorem test_problem : False := False.intro"}


def lean4checker_cases(root: pathlib.Path) -> list[Case]:
    base = root / "lean4checker/Lean4CheckerTests"
    cases = []
    for path in sorted(base.glob("*.lean")):
        name, text = path.name, path.read_text()
        if name in L4C_USE:
            case = Case("lean4checker", name, "refuse", "environment hack (expected failure)",
                        statement=f"theorem {TARGET} : False", reply=fenced(text + "\n\n" + L4C_USE[name]))
        elif name == "ReplaceAxiom.lean":
            case = pose(Case("lean4checker", name, "refuse", "environment hack (expected failure)"),
                        text, text, "efsq")
        else:
            case = Case("lean4checker", name, "n/a", "module-system replay test, test harness or library")
        cases.append(case)
    return cases


def own_cases() -> list[Case]:
    sys.path.insert(0, str(TESTS))
    import cases as own  # tests/verifiers/lean/cases.py

    return ([Case("own-honest", n, "accept", "ours", st, reply) for n, st, reply in own.HONEST]
            + [Case("own-exploits", n, "refuse", "ours", st, reply) for n, st, reply in own.EXPLOITS])


def all_cases(root: pathlib.Path) -> list[Case]:
    return (paranoia_cases(root) + safeverify_cases(root) + comparator_cases(root)
            + lean4checker_cases(root) + own_cases())


# ---------------------------------------------------------------- running the gate's checks
STATUS_LAYER = {"no_proof": "extract", "screened": "screen", "statement_error": "statement",
                "lean_error": "lean", "sorry": "lean", "bad_axioms": "axioms", "statement_mismatch": "type",
                "not_a_theorem": "type", "replay_failed": "replay", "timeout": "error", "crash": "error",
                "proved": "accepted"}


class Runner:
    """One checker per header (the challenge's opens), each on the REPL double."""

    def __init__(self, lean_cmd: str = "", lean_cwd: str = ""):
        from jury.protocol.config import DEFAULT_HEADER

        self.base_header = DEFAULT_HEADER
        self.lean_cmd, self.lean_cwd = lean_cmd, lean_cwd
        self.checkers: dict[str, object] = {}

    def checker(self, opens: str):
        from jury.verifiers.lean.backends import load_backend
        from jury.verifiers.lean.check import ProofChecker
        from jury.verifiers.lean.repl import LeanReplConfig

        header = self.base_header + ("\n" + opens if opens else "")
        if header not in self.checkers:
            if self.lean_cmd:
                config = LeanReplConfig(command=self.lean_cmd, cwd=self.lean_cwd, header=header, pool_size=1,
                                        start_timeout_s=900)
            else:
                config = LeanReplConfig(command=shlex.join([sys.executable, str(DOUBLE)]), header=header,
                                        pool_size=1, user="", isolate_network="off", memory_limit_mb=0,
                                        start_timeout_s=30)
            self.checkers[header] = ProofChecker(load_backend(config), header, timeout_s=300 if self.lean_cmd else 30)
        return self.checkers[header]

    def verdict(self, case: Case) -> tuple[str, str]:
        from jury.verifiers.lean import screen as lean_screen

        checker = self.checker(case.opens)
        if hasattr(lean_screen, "extract_proof_file"):
            proof = lean_screen.extract_proof_file(case.reply)
        else:  # the gate before whole-file checks: only the body after the target's `:=`
            proof = lean_screen.extract_proof_body(case.reply)
        if proof is None:
            return "no_proof", "no proof of test_problem in the reply"
        v = checker.check(case.statement, proof)
        return v.status, v.detail

    def unscreened(self, case: Case) -> str:
        """What the Lean-side layers alone say about a file the screen refused (defence in depth)."""
        from jury.verifiers.lean.check import judge, proof_chain
        from jury.verifiers.lean.screen import extract_proof_file, normalize_newlines, strip_header_imports

        checker = self.checker(case.opens)
        proof = extract_proof_file(case.reply)
        if proof is None:
            return "no_proof"
        submission = strip_header_imports(normalize_newlines(proof), checker.header)
        m = re.search(r"\b(?:theorem|lemma)\s+(?:_root_\.)?([\w'.«»]*" + TARGET + ")", submission)
        target = m.group(1) if m else TARGET
        from jury.verifiers.lean.repl import LeanCrash, LeanTimeout
        try:
            replies = checker.backend.run_chain(proof_chain(case.statement, submission, target), timeout_s=30)
        except (LeanTimeout, LeanCrash):
            return "error"
        return judge(replies, target)[0]

    def screen_only(self, case: Case) -> bool:
        from jury.verifiers.lean import screen as lean_screen

        if hasattr(lean_screen, "extract_proof_file"):
            proof = lean_screen.extract_proof_file(case.reply)
            return proof is not None and lean_screen.screen_file(proof) is None
        proof = lean_screen.extract_proof_body(case.reply)
        return proof is not None and lean_screen.screen(proof) is None

    def close(self):
        for c in self.checkers.values():
            c.backend.close()


def run(cases: list[Case], lean_cmd: str = "", lean_cwd: str = "") -> dict:
    logging.getLogger("jury.verifiers.lean.repl").setLevel(logging.ERROR)  # "runs as root": the double
    runner = Runner(lean_cmd, lean_cwd)
    rows, start = [], time.perf_counter()
    checked = 0
    try:
        for case in cases:
            row = {k: v for k, v in asdict(case).items() if k != "reply"}
            if case.expected == "n/a" or case.statement is None:
                row.update(status="n/a", layer="n/a", detail=case.why)
            else:
                status, detail = runner.verdict(case)
                layer = STATUS_LAYER.get(status, "error")
                if case.context and not lean_cmd and layer not in ("extract", "screen"):
                    layer = "needs Lean"  # the double cannot elaborate the challenge's own names
                row.update(status=status, layer=layer, detail=detail)
                if layer == "screen" and case.expected == "refuse" and hasattr(runner, "unscreened") \
                        and not case.context and lean_screen_has_files():
                    row["unscreened"] = STATUS_LAYER.get(runner.unscreened(case), "error")
                checked += 1
            rows.append(row)
        wall = time.perf_counter() - start
        screened = [c for c in cases if c.statement is not None and c.expected != "n/a"]
        # CPU time, best of 5 passes: the screen is pure Python, and the machine is shared
        passes = []
        for _ in range(5):
            t0 = time.process_time()
            for c in screened:
                runner.screen_only(c)
            passes.append(time.process_time() - t0)
        screen_rate = len(screened) / max(min(passes), 1e-9)
    finally:
        runner.close()
    return {"rows": rows, "checks": checked, "lean": bool(lean_cmd), "wall_s": wall, "checks_per_s": checked / wall,
            "screen_checks_per_s": screen_rate}


def lean_screen_has_files() -> bool:
    from jury.verifiers.lean import screen as lean_screen

    return hasattr(lean_screen, "extract_proof_file")


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    for corpus in dict.fromkeys(r["corpus"] for r in rows):
        rs = [r for r in rows if r["corpus"] == corpus]
        refuse = [r for r in rs if r["expected"] == "refuse"]
        accept = [r for r in rs if r["expected"] == "accept"]
        s = {"corpus": corpus, "files": len(rs), "n/a": sum(r["expected"] == "n/a" for r in rs),
             "expect_refuse": len(refuse),
             "wrongly_accepted": sum(r["layer"] == "accepted" for r in refuse),
             "refuse_needs_lean": sum(r["layer"] == "needs Lean" for r in refuse),
             "expect_accept": len(accept),
             "honest_accepted": sum(r["layer"] == "accepted" for r in accept),
             "honest_needs_lean": sum(r["layer"] == "needs Lean" for r in accept),
             "open": sum(r["expected"] == "lean" for r in rs),
             # of the exploits the screen stopped, how many the Lean-side layers (on the
             # double) also stop when the screen is skipped: the second line of defence
             "screened_judged": sum("unscreened" in r for r in refuse),
             "screened_also_lean": sum(r.get("unscreened") not in (None, "accepted") for r in refuse)}
        for layer in LAYERS[:-1]:
            s["stopped_" + layer] = sum(r["layer"] == layer for r in refuse)
        out.append(s)
    return out


def table(summary: list[dict], result: dict) -> str:
    head = ["corpus", "files", "n/a", "refuse", *(f"@{l}" for l in LAYERS[:-2]), "WRONG", "refuse?L",
            "honest", "?L", "open", "behind"]
    lines = ["  ".join(f"{h:>9}" for h in head)]
    for s in summary:
        vals = [s["corpus"][:9], s["files"], s["n/a"], s["expect_refuse"],
                *(s["stopped_" + l] for l in LAYERS[:-2]), s["wrongly_accepted"], s["refuse_needs_lean"],
                f"{s['honest_accepted']}/{s['expect_accept']}", s["honest_needs_lean"], s["open"],
                f"{s['screened_also_lean']}/{s['screened_judged']}"]
        lines.append("  ".join(f"{v:>9}" for v in vals))
    lines.append(f"{result['checks']} checks through {'Lean' if result.get('lean') else 'the double'} in {result['wall_s']:.2f} s: "
                 f"{result['checks_per_s']:.1f} checks/s end to end; screen alone "
                 f"{result['screen_checks_per_s']:.0f} checks per CPU-second")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpora", type=pathlib.Path, default=default_corpora(),
                        help="folder holding LeanParanoia/, SafeVerify/, comparator/, lean4checker/")
    parser.add_argument("--json", type=pathlib.Path, help="write every row and the summary here")
    parser.add_argument("--list", action="store_true", help="print one line per file")
    parser.add_argument("--lean-cmd", default="", help="a real REPL instead of the double, e.g. 'lake env repl'")
    parser.add_argument("--lean-cwd", default="", help="the Mathlib project the REPL runs in")
    args = parser.parse_args(argv)
    if not args.corpora.is_dir():
        print(f"no corpora at {args.corpora}", file=sys.stderr)
        return 2
    result = run(all_cases(args.corpora), args.lean_cmd, args.lean_cwd)
    summary = summarize(result["rows"])
    if args.list:
        for r in result["rows"]:
            print(f"{r['corpus']:<13} {r['name'][:48]:<48} {r['expected']:<7} {r['layer']:<10} {r['detail'][:70]!r}")
    print(table(summary, result))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, **result}, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
