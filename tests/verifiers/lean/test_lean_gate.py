"""The whole gate end to end: scripted LLM clients (autoformalizer -> consistency checker ->
prover) and the REPL double as Lean."""
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from jury.verifiers.lean.backends import load_backend
from jury.verifiers.lean.gate import GateResult, LeanGate, LeanGateConfig, consistency_verdict
from jury.verifiers.lean.repl import LeanReplConfig
from jury.verifiers.llm import Completion

DOUBLE = Path(__file__).with_name("lean_repl_double.py")
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
PROBLEM = "Let $x$ be a natural number with $x = 2$. Compute $x + 2$."
GOOD = "theorem test_problem (x : ℕ) (h₀ : x = 2) : x + 2 = 4"
HONEST = " by\n  subst h₀\n  norm_num"


class ScriptedClient:
    """An LLMClient whose replies come from reply(prompt, call) with a fixed token count."""

    def __init__(self, reply, tokens):
        self.reply, self.tokens, self.calls = reply, tokens, []

    def generate(self, prompts, *, n=1, temperature=0.0, max_tokens=512):
        self.calls.append({"prompts": list(prompts), "n": n, "temperature": temperature, "max_tokens": max_tokens})
        return [[Completion(self.reply(p, len(self.calls)), self.tokens) for _ in range(n)] for p in prompts]


def lean_block(code):
    return f"<think>plan</think>\n```lean4\n{HEADER}\n\n{code}\n```"


def formalizer_of(replies):
    """Sample i of each call gets replies[i]: a client that tracks its sample index."""
    state = {"i": 0}

    def reply(prompt, call):
        state["i"] += 1
        return replies[(state["i"] - 1) % len(replies)]
    return ScriptedClient(reply, tokens=100)


def checker_saying_correct_for(*needles):
    def reply(prompt, call):
        statement = prompt.rsplit("```lean", 1)[1]
        word = "Correct" if any(n in statement for n in needles) else "Incorrect"
        return f"<think>compare</think><comments>...</comments>\n<consistency> [{word}] </consistency>"
    return ScriptedClient(reply, tokens=10)


def prover_of(bodies):
    """Attempt k (over all calls) answers with bodies[k]; None means a reply with no code."""
    state = {"k": 0}

    def reply(prompt, call):
        state["k"] += 1
        body = bodies[min(state["k"], len(bodies)) - 1]
        return "I give up." if body is None else "Plan: substitute.\n" + lean_block(GOOD + " :=" + body)
    return ScriptedClient(reply, tokens=1000)


def config(**overrides):
    lean = LeanReplConfig(command=shlex.join([sys.executable, str(DOUBLE)]), header=HEADER, pool_size=2, user="",
                          isolate_network="off", memory_limit_mb=0, start_timeout_s=20)
    return LeanGateConfig(**{"lean": lean, "proof_timeout_s": 10.0, **overrides})


@pytest.fixture
def make_gate():
    gates = []

    def make(formalizer, checker, prover, **overrides):
        cfg = config(**overrides)
        gate = LeanGate(cfg, formalizer=formalizer, checker=checker, prover=prover,
                        backend=load_backend(cfg.lean, cfg.kimina_url))
        gates.append(gate)
        return gate
    yield make
    for g in gates:
        g.close()


FORMALIZER_REPLIES = [
    lean_block("theorem test_problem (x : ℕ) (h₀ : x = ill_typed) : x + 2 = 4 := by sorry"),  # checker: Correct
    lean_block(GOOD + " := by sorry"),
    lean_block(GOOD + " := by\n  sorry"),                                      # the same, laid out differently
    lean_block("theorem test_problem (x : ℕ) (h₀ : x = 2) : x + 2 = 5 := by sorry"),  # checker: Incorrect
    "I could not formalize this.",
    lean_block("theorem test_problem : native_decide = 4 := by sorry"),     # refused by the screen
    lean_block(GOOD),
    "<think>still thinking ```lean4\n" + GOOD + "\n```",                    # cut off by max_tokens
]


def test_gate_proves_end_to_end(make_gate):
    formalizer = formalizer_of(FORMALIZER_REPLIES)
    checker = checker_saying_correct_for("x + 2 = 4")
    prover = prover_of([" by sorry", None, " by native_decide", " by\n  skip_everything",
                        " by norm_num\naxiom c : False", HONEST, " by norm_num", None])
    gate = make_gate(formalizer, checker, prover)
    res = gate.verify(PROBLEM, "4")

    assert res.proved and res.reason == "proved" and not res.cache_hit
    assert res.statement == GOOD and res.proof.endswith(GOOD + " :=" + HONEST)  # the whole file
    assert (res.candidates, res.consistent) == (3, 2)  # ill_typed, GOOD, the x + 2 = 5 one; two judged Correct
    assert res.attempts == 6
    assert res.verdicts == ("screened", "no_proof", "screened", "lean_error", "screened", "proved", "proved", "no_proof")
    assert (res.formalizer_tokens, res.checker_tokens, res.prover_tokens) == (800, 30, 8000)
    assert res.tokens == 8830 and res.lean_s > 0 and res.time_s >= res.prove_s

    [f_call] = formalizer.calls
    assert f_call["n"] == 8 and f_call["temperature"] == 0.7 and f_call["max_tokens"] == 32768
    assert PROBLEM in f_call["prompts"][0] and "The answer is 4." in f_call["prompts"][0]
    [c_call] = checker.calls
    assert len(c_call["prompts"]) == 3 and all(p.startswith("Your role is a Lean4 expert") for p in c_call["prompts"])
    assert GOOD + " := by sorry" in c_call["prompts"][1]
    assert [c["n"] for c in prover.calls] == [4, 4]  # stopped after the round with a proof
    assert HEADER + "\n\n" + GOOD + " := by\n  sorry" in prover.calls[0]["prompts"][0]

    metrics = res.metrics()
    assert metrics["verifier/lean_proved"] == 1.0 and metrics["verifier/lean_tokens_prover"] == 8000.0


def test_same_pair_is_answered_from_the_cache(make_gate):
    formalizer = formalizer_of([lean_block(GOOD)])
    prover = prover_of([HONEST])
    gate = make_gate(formalizer, checker_saying_correct_for("x + 2 = 4"), prover)
    assert gate.verify(PROBLEM, "4").proved
    res = gate.verify(PROBLEM, " 4 ")
    assert res.proved and res.cache_hit and res.tokens == 0 and res.attempts == 0 and res.statement == GOOD
    assert len(formalizer.calls) == 1 and len(prover.calls) == 1


def test_inconclusive_when_no_statement(make_gate):
    checker, prover = checker_saying_correct_for("x"), prover_of([HONEST])
    res = make_gate(formalizer_of(["no code"]), checker, prover).verify(PROBLEM, "4")
    assert (res.proved, res.reason, res.candidates, res.formalizer_tokens) == (False, "no_statement", 0, 800)
    assert checker.calls == [] and prover.calls == []


def test_inconclusive_when_checker_rejects_everything(make_gate):
    prover = prover_of([HONEST])
    res = make_gate(formalizer_of([lean_block(GOOD)]), checker_saying_correct_for("nothing"), prover).verify(PROBLEM, "4")
    assert (res.proved, res.reason, res.candidates, res.consistent) == (False, "no_consistent_statement", 1, 0)
    assert prover.calls == []


def test_inconclusive_when_no_statement_elaborates(make_gate):
    bad = "theorem test_problem (x : ℕ) : x + 2 = ill_typed"
    res = make_gate(formalizer_of([lean_block(bad)]), checker_saying_correct_for("x"), prover_of([HONEST])).verify(PROBLEM, "4")
    assert (res.proved, res.reason, res.statement) == (False, "no_elaborating_statement", None)


def test_inconclusive_after_all_attempts_fail(make_gate):
    prover = prover_of([" by native_decide", " by\n  skip_everything", None])
    gate = make_gate(formalizer_of([lean_block(GOOD)]), checker_saying_correct_for("x + 2 = 4"), prover)
    res = gate.verify(PROBLEM, "5")
    assert (res.proved, res.reason, res.attempts, res.prover_tokens) == (False, "no_proof", 16, 16_000)
    assert [c["n"] for c in prover.calls] == [4, 4, 4, 4]
    assert res.verdicts[:3] == ("screened", "lean_error", "no_proof") and len(res.verdicts) == 16
    assert not gate.verify(PROBLEM, "5").proved and len(prover.calls) == 4  # inconclusive results are cached too


def test_timeouts_are_not_cached(make_gate):
    prover = prover_of([" by DOUBLE_HANG"])
    gate = make_gate(formalizer_of([lean_block(GOOD)]), checker_saying_correct_for("x + 2 = 4"), prover,
                     max_attempts=2, attempts_per_round=2, proof_timeout_s=0.5)
    res = gate.verify(PROBLEM, "4")
    assert res.verdicts == ("timeout", "timeout") and res.metrics()["verifier/lean_timeouts"] == 2.0
    assert not gate.verify(PROBLEM, "4").cache_hit


@pytest.mark.parametrize("word,status", [("DOUBLE_HANG", "timeout"), ("DOUBLE_CRASH", "crash")])
def test_lean_failing_while_elaborating_the_statement_is_counted_and_not_cached(make_gate, word, status):
    """Lean timing out or crashing on the statement is Lean's failure, not the statement's: the result
    says lean_failed, the metrics count it, and the pair is asked again next time (outside audit: it
    read as an ordinary "no elaborating statement", counted nowhere, cached for good)."""
    statement = f"theorem test_problem (x : ℕ) (h₀ : x = 2) (h₁ : {word} = {word}) : x + 2 = 4"
    gate = make_gate(formalizer_of([lean_block(statement)]), checker_saying_correct_for("x + 2 = 4"),
                     prover_of([HONEST]), proof_timeout_s=0.5)
    res = gate.verify(PROBLEM, "4")
    assert (res.proved, res.reason, res.verdicts) == (False, "lean_failed", (status,))
    assert res.metrics()[f"verifier/lean_{status}s" if status == "timeout" else "verifier/lean_crashes"] == 1.0
    assert not gate.verify(PROBLEM, "4").cache_hit


def test_consistency_tag_parsing():
    assert consistency_verdict("<consistency> [Correct] </consistency>") is True
    assert consistency_verdict("<consistency>Incorrect</consistency>") is False
    assert consistency_verdict("<consistency>Correct</consistency> later <consistency> **Incorrect** </consistency>") is False
    assert consistency_verdict("<think><consistency>Correct</consistency>") is None  # only a thought, cut off
    assert consistency_verdict("Correct") is None


@pytest.mark.parametrize("field,value", [("num_statements", 0), ("max_attempts", 0), ("prover_max_tokens", 0),
                                         ("prover_temperature", -0.1), ("proof_timeout_s", 0.0)])
def test_config_refuses_bad_values_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        LeanGateConfig(**{field: value})


def test_defaults_follow_the_paper():
    cfg = LeanGateConfig()
    assert (cfg.num_statements, cfg.max_attempts, cfg.prover_temperature, cfg.prover_max_tokens) == (8, 16, 0.7, 32768)
    assert "Goedel-Prover-V2" in cfg.prover_model and "QwQ" in cfg.checker_model
    assert GateResult(False, "no_proof").tokens == 0


def test_importing_the_gate_loads_no_heavy_frameworks():
    code = ("import sys, jury.verifiers.lean.gate; "
            "print([m for m in ('vllm', 'ray', 'torch', 'deepspeed') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
