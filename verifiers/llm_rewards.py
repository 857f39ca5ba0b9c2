"""The two baselines of JURY-RL's Table 1 that ask an external LLM (§5.3), as scheme objects
(verifiers/schemes.py's protocol); their arithmetic is rewards.llm_judge and rewards.llm_kd.

    judge = LLMJudge(client, max_tokens=1024)      # reward=llm_judge
    teacher = LLMKD(client, checker, "{problem}\\n")  # reward=llm_kd
    result = judge.score(group, view)              # one batched call per group, for what is not cached

LLM-as-a-Judge: the judge reads the question and one final answer with the paper's Appendix D
prompt (prompts/jury_judge.txt) and ends its reply with True or False. Parse rule (the paper
gives none): the last whole word `true` or `false`, any case, in the reply after any
reasoning block (llm.strip_reasoning); a reply with neither is "no verdict": reward 0, counted
(judge/no_verdict). Each distinct (question, answer) is asked once and cached, verdict or not:
at the default temperature 0 the judge would answer the same again.

LLM-KD: the teacher answers each problem once, greedy by default, and the run's label checker
extracts its answer (the last \\boxed{} for math), which becomes the pseudo-label every sample
is checked against with the same checker. The paper gives no teacher prompt; the teacher is
shown the problem in the run's own template (data.template, without the policy's chat template:
a chat teacher's server applies its own). A teacher reply with no extractable answer labels
nothing: the group gets 0 everywhere, counted (kd/no_teacher_answer; the answer is cached, so
the problem is not asked again).

A failing LLM call raises: the worker scores the group again and finally sends it marked
`error`, so that the learner never trains on a reward nobody gave.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import replace

from jury.protocol.messages import RolloutGroup
from jury.verifiers import rewards
from jury.verifiers.checker import LabelChecker
from jury.verifiers.llm import LLMClient, fill, generate_checked, load_prompt, strip_reasoning
from jury.verifiers.rewards import GroupView, RewardResult

_VERDICT = re.compile(r"\b(true|false)\b", re.IGNORECASE)
MAX_FIELD_CHARS = 4_000  # one rambling answer must not fill the judge's context


def parse_verdict(reply: str) -> bool | None:
    """True / False: the last whole word true or false after any reasoning; None: neither."""
    found = _VERDICT.findall(strip_reasoning(reply))
    return None if not found else found[-1].lower() == "true"


def judge_prompt(question: str, answer: str) -> str:
    return fill(load_prompt("jury_judge"), question=question[:MAX_FIELD_CHARS], answer=answer[:MAX_FIELD_CHARS])


class _Cache(OrderedDict):
    """At most `size` entries, the least recently used dropped first."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def get_fresh(self, key):
        self.move_to_end(key)
        return self[key]

    def put(self, key, value):
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


class LLMJudge:
    """reward=llm_judge: the judge's True/False about (question, answer), per distinct answer."""

    def __init__(self, llm: LLMClient | None, *, max_tokens: int = 1024, temperature: float = 0.0,
                 cache_size: int = 100_000):
        if llm is None:
            raise ValueError("reward=llm_judge needs an LLM client (verifier.judge_model)")
        self.llm, self.max_tokens, self.temperature = llm, max_tokens, temperature
        self.cache = _Cache(cache_size)  # (question, answer key) -> verdict (None: no verdict)
        self.totals = {"judge/llm_calls": 0.0, "judge/cache_hits": 0.0, "judge/no_verdict": 0.0}

    def score(self, group: RolloutGroup, view: GroupView) -> RewardResult:
        question = group.task.statement
        # the judge reads the answer as written by the first sample that gave it
        written = {}
        for key, sample in zip(view.answer_keys, group.samples):
            if key is not None:
                written.setdefault(key, sample.answer)
        asked = [k for k in written if (question, k) not in self.cache]
        replies = generate_checked(self.llm, [judge_prompt(question, written[k]) for k in asked], n=1,
                                   temperature=self.temperature, max_tokens=self.max_tokens)
        counts = {"judge/llm_calls": float(len(asked)), "judge/cache_hits": float(len(written) - len(asked)),
                  "judge/no_verdict": 0.0}
        for key, (reply,) in zip(asked, replies):
            verdict = parse_verdict(reply.text)
            counts["judge/no_verdict"] += verdict is None
            self.cache.put((question, key), verdict)
        verdicts = {k: self.cache.get_fresh((question, k)) for k in written}
        for k, v in counts.items():
            self.totals[k] += v
        result = rewards.llm_judge(view, judged=[verdicts.get(k) for k in view.answer_keys])
        return replace(result, scheme="llm_judge", counts=counts)

    def stats(self) -> dict[str, float]:
        return {f"verifier/{k.replace('/', '_')}": v for k, v in self.totals.items()}

    def close(self) -> None:
        pass


class LLMKD:
    """reward=llm_kd: the teacher's answer to the problem, asked once, is the pseudo-label."""

    def __init__(self, llm: LLMClient | None, checker: LabelChecker | None, template: str, *,
                 max_tokens: int = 3072, temperature: float = 0.0, cache_size: int = 100_000):
        if llm is None or checker is None:
            raise ValueError("reward=llm_kd needs an LLM client (verifier.teacher_model) and the run's label checker")
        if "{problem}" not in template:
            raise ValueError(f"reward=llm_kd: the teacher's template has no {{problem}}: {template!r}")
        self.llm, self.checker, self.template = llm, checker, template
        self.max_tokens, self.temperature = max_tokens, temperature
        self.labels = _Cache(cache_size)  # problem -> the teacher's extracted answer (None: it gave none)
        self.totals = {"kd/llm_calls": 0.0, "kd/no_teacher_answer": 0.0, "kd/unlabelled_groups": 0.0,
                       "kd/teacher_unread": 0.0}

    def score(self, group: RolloutGroup, view: GroupView) -> RewardResult:
        problem = group.task.statement
        counts = {"kd/llm_calls": 0.0, "kd/no_teacher_answer": 0.0, "kd/unlabelled_groups": 0.0,
                  "kd/teacher_unread": 0.0}
        label = None
        if problem not in self.labels:
            # one pass, never str.format: the template and the problem may hold braces
            ((reply,),) = generate_checked(self.llm, [self.template.replace("{problem}", problem)], n=1,
                                           temperature=self.temperature, max_tokens=self.max_tokens)
            label = self.checker.extract(reply.text)
            counts["kd/llm_calls"] = 1.0
            if self.checker.unread(reply.text):  # the check process timed out or failed reading it: the
                counts["kd/teacher_unread"] = 1.0  # teacher is not to blame, and the next group asks again
            else:
                self.labels.put(problem, label)
                counts["kd/no_teacher_answer"] = float(label is None)
        else:
            label = self.labels.get_fresh(problem)
        verdicts = None
        if label is None:
            counts["kd/unlabelled_groups"] = 1.0
        else:
            verdicts = [v.kind for v in self.checker.check([s.answer for s in group.samples], label,
                                                           [s.text for s in group.samples])]
        for k, v in counts.items():
            self.totals[k] += v
        return replace(rewards.llm_kd(view, verdicts=verdicts), scheme="llm_kd", counts=counts)

    def stats(self) -> dict[str, float]:
        return {f"verifier/{k.replace('/', '_')}": v for k, v in self.totals.items()}

    def close(self) -> None:
        pass
