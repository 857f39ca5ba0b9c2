"""DeRL's reward side (Diverse-Exploration RL, §3.2.2 and §3.3).

A sample of a diversifying prompt earns 1 only when correct and judged dissimilar to the
plan it was shown (`diversity_rewards`, an LLM judge); a Lean sample earns 1 only when the
proof checks and uses none of the automation tactics on the paper's list
(`lean_diversity_reward`). `RandomReward` is §3.3's control. Original prompts keep the
plain correctness reward.

    verdicts = diversity_rewards(client, items, cfg)    # NL diversifying samples
    verdicts = [lean_diversity_reward(p, ok, cfg) ...]  # Lean diversifying samples
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from jury.protocol.config import FORBIDDEN_TACTICS, DerlConfig
from jury.verifiers.lean.lexer import is_id_first, is_id_rest  # Lean 4's isIdFirst / isIdRest
from jury.verifiers.llm import LLMClient, fill, generate_checked, load_prompt, strip_reasoning

# ---------------------------------------------------------------- rewards (§3.2.2, §3.3)
@dataclass(frozen=True)
class DiversityVerdict:
    reward: float  # 1.0 only if correct and diverse
    correct: bool  # the answer matched / the Lean proof checked
    diverse: bool | None  # judged dissimilar / free of forbidden tactics; None = no verdict
    unparsable: bool = False  # the judge replied, but without a verdict
    forbidden: tuple[str, ...] = ()  # Lean: the forbidden tactics found


_VERDICT_STARRED = re.compile(r"\*{2,}\s*(True|False)\s*\*{2,}")
_VERDICT_OUTPUT = re.compile(r"Output\W{0,6}(True|False)\b")
_VERDICT_BARE = re.compile(r"\b(True|False)\b")


def parse_similarity(reply: str) -> bool | None:
    """The judge's verdict: True = similar (cheated), False = dissimilar, None = unparsable.

    The prompt asks for *****True***** / *****False*****; the paper's judge outputs also
    show `Output: **False**` and `Output: False` (App. 8), with the verdict first and an
    explanation after. So: the first starred verdict, else the first `Output: ...`, else a
    lone True/False word when only one of the two appears at all.
    """
    body = strip_reasoning(reply)
    for pattern in (_VERDICT_STARRED, _VERDICT_OUTPUT):
        m = pattern.search(body)
        if m:
            return m.group(1) == "True"
    bare = set(_VERDICT_BARE.findall(body))
    return bare.pop() == "True" if len(bare) == 1 else None


@dataclass(frozen=True)
class DiversityItem:
    problem: str
    plan: str  # the plan shown in the diversifying prompt
    solution: str
    correct: bool  # the boxed answer matched (decided by the correctness verifier)


def diversity_rewards(
    client: LLMClient, items: Sequence[DiversityItem], cfg: DerlConfig = DerlConfig()
) -> list[DiversityVerdict]:
    """§3.2.2, natural language: 1 iff the answer is correct and the judge outputs False.

    An unparsable verdict earns 0: a reward of 1 must rest on the judge saying "dissimilar".
    It stays visible as unparsable=True (metric derl/judge_unparsable). Samples the judge
    is not asked about (incorrect ones, when not cfg.judge_all) have diverse=None.
    """
    asked = [i for i, it in enumerate(items) if it.correct or cfg.judge_all]
    template = load_prompt("derl_judge")
    prompts = [
        fill(template, prompt=items[i].problem, proof_plan=items[i].plan, solution_str=items[i].solution) for i in asked
    ]
    outs = generate_checked(client, prompts, n=1, temperature=cfg.judge_temperature, max_tokens=cfg.judge_max_tokens)
    similar = {i: parse_similarity(out[0].text) for i, out in zip(asked, outs)}
    verdicts = []
    for i, it in enumerate(items):
        s = similar.get(i)
        diverse = None if s is None else not s
        reward = float(it.correct and diverse is True)
        verdicts.append(DiversityVerdict(reward, it.correct, diverse, unparsable=i in similar and s is None))
    return verdicts


# ---------------------------------------------------------------- forbidden Lean tactics (§3.2.2)
# Decisions, from the paper's rule "If any tactic from the forbidden list appears in the
# generated proof, the diversity metric assigns a reward of 0", matched by tactic *name*:
# - A name counts only as a whole identifier: `simp_arith`, `ring_nf`, `nlinarith`, `simpa`,
#   `field_simp` are other tactics and are allowed. The introduction lists `nlinarith`
#   among automation tactics, but the list the model is shown (§3.1, §3.2.2) omits it, and
#   rewarding against a rule the prompt never states would punish obedience. A stricter
#   run passes its own DerlConfig.forbidden_tactics (the prompt then shows that list).
# - Lean spells variants with a trailing `!` or `?` in the same identifier (`simp?`,
#   `linarith!`, `aesop?`); they run the listed tactic, so they count as it. `simp only
#   [...]` and `simp at h` are `simp`.
# - Dotted names are one identifier: `Nat.simp` or `h.trivial` is not the tactic.
# Without Lean, a token scanner finds the names outside comments, strings, char and name
# literals and `@[...]` attributes. (lean_screen's lexer, built to refuse, rejects strings
# and splits names at `.`; this one must read them, so only the character classes are shared.) It cannot tell the term `trivial` (`exact trivial`)
# from the tactic and counts it, erring toward 0 since a reward of 1 must be unambiguous;
# a syntax-tree callable (below) resolves that.
_CHAR_LITERAL = re.compile(r"'(?:\\.[^']*|[^'\\])'")  # 'x', '\n', '\'', '\u{3b1}'


def _read_ident(src: str, i: int) -> int:
    """End of the dotted identifier starting at i (components plain or «escaped»)."""
    while True:
        if src[i] == "«":
            close = src.find("»", i + 1)
            i = len(src) if close < 0 else close + 1
        else:
            i += 1
            while i < len(src) and is_id_rest(src[i]):
                i += 1
        if i + 1 < len(src) and src[i] == "." and (is_id_first(src[i + 1]) or src[i + 1] == "«"):
            i += 1
            continue
        return i


def _skip_nested(src: str, i: int, open_: str, close: str) -> int:
    """Index after the `close` matching the `open_` at i; Lean block comments nest."""
    depth, i = 1, i + len(open_)
    while i < len(src) and depth:
        if src.startswith(open_, i):
            depth, i = depth + 1, i + len(open_)
        elif src.startswith(close, i):
            depth, i = depth - 1, i + len(close)
        else:
            i += 1
    return i


def lean_identifiers(src: str) -> list[str]:
    """Identifiers of Lean 4 source outside comments, strings, char/name literals and attributes."""
    names, i = [], 0
    while i < len(src):
        c = src[i]
        if src.startswith("--", i):
            newline = src.find("\n", i)
            i = len(src) if newline < 0 else newline
        elif src.startswith("/-", i):
            i = _skip_nested(src, i, "/-", "-/")
        elif src.startswith("@[", i):
            i = _skip_nested(src, i + 1, "[", "]")
        elif c == '"':
            i += 1
            while i < len(src) and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
        elif c == "'" and (char := _CHAR_LITERAL.match(src, i)):
            i = char.end()
        elif c == "`":  # `name / ``name literal: a name, not a tactic call
            i += 1 + (src.startswith("`", i + 1))
            if i < len(src) and (is_id_first(src[i]) or src[i] == "«"):
                i = _read_ident(src, i)
        elif is_id_first(c) or c == "«":
            end = _read_ident(src, i)
            names.append(src[i:end])
            i = end
        else:
            i += 1
    return names


def forbidden_tactics_used(
    proof: str,
    forbidden: Sequence[str] = FORBIDDEN_TACTICS,
    syntax_tactics: Callable[[str], Iterable[str]] | None = None,
) -> tuple[str, ...]:
    """The forbidden tactics a Lean proof uses, sorted; empty when it uses none.

    `proof` is the Lean code the model wrote (what the Lean server checks), not its prose.
    `syntax_tactics`, when Lean is present, returns the name of every tactic in the proof's
    syntax tree as written (`simp`, `simp?`, `linarith!`); without it the token scanner
    above stands in. Both are normalised the same way.
    """
    names = syntax_tactics(proof) if syntax_tactics is not None else lean_identifiers(proof)
    return tuple(sorted({n.rstrip("!?") for n in names} & set(forbidden)))


def lean_diversity_reward(
    proof: str,
    proof_checks: bool,
    cfg: DerlConfig = DerlConfig(),
    syntax_tactics: Callable[[str], Iterable[str]] | None = None,
) -> DiversityVerdict:
    """§3.2.2, Lean: 1 iff the proof checks and uses no forbidden tactic. "We do not reward
    proofs that fail to be verified, even if they avoid all tactics in the automation list.\""""
    used = forbidden_tactics_used(proof, cfg.forbidden_tactics, syntax_tactics)
    return DiversityVerdict(float(proof_checks and not used), proof_checks, not used, forbidden=used)


class RandomReward:
    """§3.3's control: "a reward of either 0 or 1 is assigned uniformly at random", i.e. an
    independent fair coin per sample, blind to the output, seeded so a run replays.

    Table 1 applies it two ways, and the wiring picks one: to every prompt ("Random Reward
    (on all prompts)") or to diversifying prompts only, correctness staying on the
    originals ("Partial Random Reward").
    """

    def __init__(self, seed: int):
        self._rng = random.Random(seed)

    def rewards(self, count: int) -> list[float]:
        return [float(self._rng.getrandbits(1)) for _ in range(count)]
