"""TinyV add-on cascade with a scripted client that honours the LLMClient contract."""
from typing import Sequence

import pytest
from jury.verifiers.llm import Completion
from jury.verifiers.math.verify import check
from jury.verifiers.tinyv import PROMPT_PATH, TinyVItem, build_prompt, load_template, parse_reply, tinyv_verify


class ScriptedClient:
    """n completions per prompt, in prompt order; replies chosen by a rule on the prompt."""

    def __init__(self, reply):
        self.reply = reply
        self.calls: list[tuple[list[str], dict]] = []

    def generate(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0,
                 max_tokens: int = 512) -> list[list[Completion]]:
        self.calls.append((list(prompts), dict(n=n, temperature=temperature, max_tokens=max_tokens)))
        return [[Completion(self.reply(p), num_tokens=1) for _ in range(n)] for p in prompts]


def test_template_is_the_papers_figure_8():
    template = load_template()
    assert PROMPT_PATH.name == "tinyv.txt" and PROMPT_PATH.parent.name == "prompts"
    assert template.startswith("You are an AI tasked with identifying false negatives in answer verification.")
    assert template.endswith('Return "True" if the model\'s answer is correct, otherwise return "False".')
    positions = [template.index(f) for f in ("{{QUESTION}}", "{{GROUND_TRUTH_ANSWER}}", "{{MODEL_ANSWER}}")]
    assert positions == sorted(positions)


def test_build_prompt_fills_fields_once():
    prompt = build_prompt("What is 6/4?", "1.5", "{{QUESTION}} 3/2")
    assert "<question>What is 6/4?</question>" in prompt
    assert "<ground_truth_answer>1.5</ground_truth_answer>" in prompt
    assert "<model_answer>{{QUESTION}} 3/2</model_answer>" in prompt   # not substituted again
    assert "{{GROUND_TRUTH_ANSWER}}" not in prompt


@pytest.mark.parametrize("reply, label", [
    ("True", True), ("False", False), (" true\n", True), ("FALSE.", False),
    ("The answers differ in form only. True", True), ("It looks true at first, but False", False),
    ("", None), ("Yes", None), ("untrue", None),
    ("<think>True or False? I lean to True</think>False", False),  # the verdict after the reasoning
    ("<think>is it True", None),  # thinking cut off: no verdict
])
def test_parse_reply(reply, label):
    assert parse_reply(reply) is label


def test_cascade_asks_only_rule_negatives():
    question = "Which clock is right more often: one minute slow, or stopped?"
    reference = "A stopped clock shows the correct time more often."
    answers = [r"\text{the stopped one}", r"\text{the slow one}", "stopped clock", None, "x" * 10]
    verdicts = ["incorrect", "incorrect", "correct", "no_answer", "error"]
    items = [TinyVItem(question, reference, a, v) for a, v in zip(answers, verdicts)]
    client = ScriptedClient(lambda p: "True" if "the stopped one" in p else "False")
    assert tinyv_verify(client, items) == [True, False, True, False, None]
    (prompts, options), = client.calls                      # one batched call
    assert len(prompts) == 2 and options["n"] == 1 and options["temperature"] == 0.0
    assert all(f"<question>{question}</question>" in p for p in prompts)


def test_cascade_with_real_rule_verdicts():
    reference = r"\frac{1}{2}"
    answers = ["0.5", "one half", "0.6"]
    items = [TinyVItem("Half of 1?", reference, a, check(a, reference)) for a in answers]
    assert [i.rule_verdict for i in items] == ["correct", "incorrect", "incorrect"]
    client = ScriptedClient(lambda p: "True" if "one half" in p else "False")
    assert tinyv_verify(client, items) == [True, True, False]


def test_no_call_when_rules_decide_everything():
    client = ScriptedClient(lambda p: "True")
    assert tinyv_verify(client, [TinyVItem("q", "1", "1", "correct")]) == [True]
    assert client.calls == []


def test_unparsable_reply_is_none_and_short_client_fails_loudly():
    items = [TinyVItem("q", "1", "2", "incorrect")]
    assert tinyv_verify(ScriptedClient(lambda p: "maybe"), items) == [None]

    class Broken(ScriptedClient):
        def generate(self, prompts, **kw):
            return []

    with pytest.raises(RuntimeError, match="answered 0 of 1"):
        tinyv_verify(Broken(lambda p: ""), items)


def test_an_answerless_response_is_asked_about_by_its_final_statement():
    """TinyV's own pipeline asks its model about every response the rules do not accept, one with
    no answer they could read included (uw-nsl/TinyV@dae2c7bd: prime_math's match_answer always
    returns some text, and tinyv.py's add-on branch asks whenever the rules said not correct)."""
    text = "Let me add.\nFirst 5 + 7 makes a dozen. So the total is twelve."
    client = ScriptedClient(lambda p: "True" if "<model_answer>So the total is twelve.</model_answer>" in p else "False")
    assert tinyv_verify(client, [TinyVItem("q", "12", None, "no_answer", text)]) == [True]
    # verifier.tinyv_unanswered=zero: it stays wrong, and nothing is asked
    client.calls.clear()
    assert tinyv_verify(client, [TinyVItem("q", "12", None, "no_answer", text)], ask_unanswered=False) == [False]
    assert client.calls == []
    # nothing to show: an empty response, or one cut off while thinking
    for empty in ("", "  \n ", "<think>so the answer is 12"):
        assert tinyv_verify(client, [TinyVItem("q", "12", None, "no_answer", empty)]) == [False]
    assert client.calls == []


@pytest.mark.parametrize("text, shown", [
    ("So the total is twelve.", "So the total is twelve."),
    ("First step. Second step!  And so it is 12", "And so it is 12"),
    ("The sum is 12.\n\nI hope this helps!\n", "I hope this helps!"),
    ("<think>it is 11</think>The total is twelve.", "The total is twelve."),
    ("x" * 1000, "x" * 300),
])
def test_final_statement(text, shown):
    from jury.verifiers.tinyv import final_statement

    assert final_statement(text) == shown
