"""The rule-based math verifier behind the label-checker protocol (verifiers/checker.py).

    checker = MathChecker(cfg); checker.preflight()    # refuses a check_timeout_s below one check's cost
    answers = [checker.extract(text) ...]              # in the process pool, under the same timeout
    keys = checker.keys(answers)                       # vote keys, equivalent answers merged by check
    verdicts = checker.check(answers, label, texts)
        each answer: the verdict cache, then the cheap in-process check (quick_check), then
        the process pool with a hard timeout for what is left (judge: symbolic, may hang)

A verdict of the pool that is not "ok" is a verdict too ("timeout" | "error"), never a silent
"incorrect"; so is an extraction that timed out (an adversarial answer), never a silent
"no_answer". Verdicts depend on the rounding setting, so it is part of the cache key.
"""
from __future__ import annotations

import re
import time
from collections import Counter, OrderedDict

from jury.protocol.config import ConfigError, VerifierConfig
from jury.protocol.messages import Verdict
from jury.verifiers.math.verify import Judgement, answer_key, normalize, quick_check, reference_parts
from jury.verifiers.pool import CheckPool

CHECK_FN = "jury.verifiers.math.verify:judge"
EXTRACT_FN = "jury.verifiers.math.extract:extract_answer"
PRELOAD = ("jury.verifiers.math.verify",)  # imported as a check process starts (it imports the extractor too)
# the check preflight times: symbolic, as the checks that reach the pool are (quick_check settles
# plain numbers in-process)
PREFLIGHT_CHECK = ("(x+1)^2", "x^2+2x+1", False)
# the most checks in the pool one group's vote keys may take to merge equivalent answers (two a pair
# of distinct symbolic answers: 16 ask for 240, unless one way already parts them; one takes about
# 10 ms); past it a key stays as answer_key gave it (counted)
MERGE_CHECKS = 256
# answer_key's key of a single rational, maybe of named variables ("x=3"): equal values, equal keys
_RATIONAL_KEY = re.compile(r"(?:([^=]+)=)?(-?\d+(?:/\d+)?)")


def _distinct_rationals(a: str, b: str) -> bool:
    """Are two vote keys two values without a check: both rationals, of the same variables or both
    named (x=3 and x=4, 3 and 4, x=3 and y=3)? A named one against a bare one (x=3 and 3) is checked."""
    ma, mb = _RATIONAL_KEY.fullmatch(a), _RATIONAL_KEY.fullmatch(b)
    return bool(ma and mb) and (ma.group(1) == mb.group(1) or (ma.group(1) is not None and mb.group(1) is not None))


class VerdictCache:
    """(normalised answer, normalised reference, accept_rounded) -> Judgement, least recently used out first."""

    def __init__(self, size: int):
        self.size, self._d = size, OrderedDict()
        self.hits = self.misses = 0

    def get(self, key):
        kind = self._d.get(key)
        if kind is None:
            self.misses += 1
            return None
        self._d.move_to_end(key)
        self.hits += 1
        return kind

    def put(self, key, kind: Judgement):
        self._d[key] = kind
        if len(self._d) > self.size:
            self._d.popitem(last=False)


MAX_UNREAD = 4096  # failed extractions remembered until check() reads them (a group's worth is what it needs)


class MathChecker:
    name = "math"

    def __init__(self, cfg: VerifierConfig):
        self.cfg = cfg
        self.pool = CheckPool(cfg.pool_workers, cfg.check_timeout_s, preload=PRELOAD)
        self.cache = VerdictCache(cfg.cache_size)
        self.counts = {"pool_checks": 0, "rounded_accepts": 0, "extract_timeouts": 0, "extract_errors": 0,
                       "key_merges": 0, "key_checks": 0, "key_pairs_undecided": 0}
        self.check_cost_s = float("nan")  # one check in a check process, timed by preflight()
        self._unread: dict[str, str] = {}  # text -> "timeout" | "error": its extraction failed, until check()
        self._last_read: tuple = ((), [])  # read()'s last ((texts, parts), answers): TinyV asks again

    def preflight(self) -> float:
        """Time one real check in a check process; a check_timeout_s below its cost would make every
        check a timeout, so it is refused here, at start (ConfigError), naming the setting and the
        cost. Returns the cost in seconds."""
        self.check_cost_s = self.pool.cost_of(CHECK_FN, PREFLIGHT_CHECK)
        if self.cfg.check_timeout_s <= self.check_cost_s:
            raise ConfigError(f"verifier.check_timeout_s ({self.cfg.check_timeout_s:g}s) is not above the cost of one "
                              f"check: {self.check_cost_s * 1e3:.2f} ms measured in a check process of this worker; every "
                              f"check would end as a timeout. Give it several times that (answers vary)")
        return self.check_cost_s

    def extract(self, text: str) -> str | None:
        """The answer the vote counts (verifier.unanchored: whether a last expression without a box
        or an answer statement is one), read in a check process under check_timeout_s: an
        adversarial text cannot hold this worker. One that times out (or fails) has no answer,
        and check() gives it a "timeout" ("error") verdict."""
        return self._extract([text], 1)[0]

    def unread(self, text: str) -> str | None:
        """"timeout" or "error" when the last extraction of `text` failed (not an answerless text)."""
        return self._unread.get(text)

    def _extract(self, texts: list[str], parts: int) -> list[str | None]:
        out = []
        for text, r in zip(texts, self.pool.map(EXTRACT_FN, [(t, parts, self.cfg.unanchored) for t in texts])):
            if r.status != "ok":
                self.counts[f"extract_{r.status}s"] += 1
                self._unread[text] = r.status
                while len(self._unread) > MAX_UNREAD:  # a run with no label never calls check(), which
                    del self._unread[next(iter(self._unread))]  # empties it: the oldest go
            out.append(r.value if r.status == "ok" else None)
        return out

    def keys(self, answers: list[str | None]) -> list[str | None]:
        """Vote keys: equivalent answers, equal keys; None (no answer) never votes.

        answer_key gives one key to equal rationals, tuples of them and answers equal once
        normalised, but not to other forms of one value: \\sqrt{8} and 2\\sqrt{2}, \\{1,2\\} and
        \\{2,1\\}, \\frac{\\pi}{2} and \\pi/2 kept two keys, split the vote and paid an equivalent
        form of the majority 0. So each distinct key, in first-seen order after the rationals, takes
        the key of the first earlier one whose answer `check` (exact, no rounding) finds equal to its own both ways
        round (one way, a decimal reference is read as rounded: 3.14 is not \\pi), never two
        rationals (two keys, two values): the run's own equivalence, as TTRL grades every sample against the
        majority with its grader (PRIME-RL/TTRL@c46b671 verl/trainer/ppo/ttrl_utils.py). Cached with
        the label checks; a check that times out merges nothing, and an answer in two of them is
        asked about no more; past MERGE_CHECKS pool checks a group's keys stay
        (verifier/key_pairs_undecided counts the pairs left so)."""
        keys = [answer_key(a) for a in answers]
        first: dict[str, str] = {}  # key -> the first answer with it
        for k, a in zip(keys, answers):
            if k is not None:
                first.setdefault(k, a)
        # rationals first: a form answer_key could not evaluate (\\log_2 8, e^0, 90^\\circ) merges
        # into its value's key, which stays a plain rational a gate can parse
        distinct = sorted(first, key=lambda k: not (_RATIONAL_KEY.fullmatch(k) and "=" not in k))
        # a pair is one answer when `check` says so both ways round: one way, a decimal reference is
        # read as rounded (3.14 would take \pi into its key, in the order the samples came)
        verdicts: dict[tuple[int, int], str | None] = {}  # (answer, reference) -> verdict; None: ask the pool
        pairs = []
        for j in range(1, len(distinct)):
            for i in range(j):
                if _distinct_rationals(distinct[i], distinct[j]):
                    continue  # two rationals with two keys are two values
                pairs.append((i, j))
                for x, y in ((j, i), (i, j)):
                    a, r = first[distinct[x]], first[distinct[y]]
                    hit = self.cache.get((normalize(a), normalize(r), False))
                    verdicts[x, y] = hit.verdict if hit is not None else quick_check(a, r)
        todo = [(x, y) for i, j in pairs for x, y in ((j, i), (i, j))
                if verdicts[x, y] is None and "incorrect" not in (verdicts[j, i], verdicts[i, j])]
        # a few at a time: an answer in two checks that timed out (or failed) is asked about no more,
        # so an adversarial answer costs two timeouts, not one per other answer
        asked, failed, step = 0, Counter(), max(1, self.cfg.pool_workers)
        while todo and asked < MERGE_CHECKS:
            n = min(step, MERGE_CHECKS - asked)
            batch, todo = todo[:n], todo[n:]
            results = self.pool.map(CHECK_FN, [(first[distinct[x]], first[distinct[y]], False) for x, y in batch])
            asked += len(batch)
            for (x, y), r in zip(batch, results):
                if r.status == "ok":
                    self.cache.put((normalize(first[distinct[x]]), normalize(first[distinct[y]]), False), r.value)
                    verdicts[x, y] = r.value.verdict
                else:
                    verdicts[x, y] = r.status
                    failed.update((x, y))
            # a pair one check parted, or whose one check failed, is asked no more
            todo = [(x, y) for x, y in todo if failed[x] < 2 and failed[y] < 2
                    and verdicts[y, x] not in ("incorrect", "timeout", "error")]
        self.counts["key_checks"] += asked
        # pairs neither merged nor parted: a check past the cap, or one that timed out or failed
        self.counts["key_pairs_undecided"] += sum(
            "incorrect" not in (verdicts[j, i], verdicts[i, j]) and not verdicts[j, i] == verdicts[i, j] == "correct"
            for i, j in pairs)
        same = {(i, j): verdicts[j, i] == verdicts[i, j] == "correct" for i, j in pairs}
        root = list(range(len(distinct)))
        for j in range(1, len(distinct)):
            root[j] = next((i for i in range(j) if root[i] == i and same.get((i, j))), j)
        self.counts["key_merges"] += sum(r != j for j, r in enumerate(root))
        merged = {k: distinct[root[j]] for j, k in enumerate(distinct)}
        return [None if k is None else merged[k] for k in keys]

    def read(self, answers: list[str | None], label: str, texts: list[str]) -> list[str | None]:
        """The answers check() compares with `label`: `answers` themselves, or for a label of several
        parts each text read again with that many parts (a response may box one part at a time; the
        vote never reads the label, so its answers stay as they are). The last reading is kept, so
        a second call about the same texts (TinyV showing its model what was checked) costs nothing."""
        return self._read(answers, label, texts, reuse=True)

    def _read(self, answers: list[str | None], label: str, texts: list[str], reuse: bool) -> list[str | None]:
        parts = reference_parts(label)
        if parts <= 1:
            return list(answers)
        key = (tuple(texts), parts)
        if not (reuse and self._last_read[0] == key):  # check() reads afresh: its failures are counted
            self._last_read = (key, self._extract(texts, parts))
        return list(self._last_read[1])

    def check(self, answers: list[str | None], label: str, texts: list[str]) -> list[Verdict]:
        """Cache, then the cheap in-process check, then the pool for what is left, on the answers
        read() gives for this label."""
        answers = self._read(answers, label, texts, reuse=False)
        unread, self._unread = self._unread, {}
        out: list[Verdict | None] = [None] * len(answers)
        ref = normalize(label)
        todo = []
        for i, a in enumerate(answers):
            t0 = time.perf_counter()
            if a is None:
                out[i] = Verdict(unread.get(texts[i], "no_answer"), self.name, 0.0)
                continue
            key = (normalize(a), ref, self.cfg.accept_rounded)
            hit = self.cache.get(key)
            if hit is not None:
                out[i] = Verdict(hit.verdict, self.name, time.perf_counter() - t0, cache_hit=True)
                self.counts["rounded_accepts"] += hit.rounded
                continue
            kind = quick_check(a, label)
            if kind is not None:
                self.cache.put(key, Judgement(kind, False))
                out[i] = Verdict(kind, self.name, time.perf_counter() - t0)
                continue
            todo.append((i, key))
        if todo:
            results = self.pool.map(CHECK_FN, [(answers[i], label, self.cfg.accept_rounded) for i, _ in todo])
            self.counts["pool_checks"] += len(todo)
            for (i, key), r in zip(todo, results):
                kind = r.value.verdict if r.status == "ok" else r.status  # "timeout" | "error" are verdicts too
                if r.status == "ok":
                    self.cache.put(key, r.value)
                    self.counts["rounded_accepts"] += r.value.rounded
                out[i] = Verdict(kind, self.name, r.latency_s)
        return out

    def stats(self) -> dict[str, float]:
        c = self.cache
        return {**{f"verifier/{k}": v for k, v in self.counts.items()},
                "verifier/cache_hit_rate": c.hits / max(1, c.hits + c.misses),
                "verifier/pool_restarts": self.pool.restarts}

    def close(self) -> None:
        self.pool.close()
