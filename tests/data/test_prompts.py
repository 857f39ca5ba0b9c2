"""Prompt templates, named or from a file, then the model's chat template: on the tiny model's
tokenizer (no chat template) and tiny-chat's (the same tokenizer with one)."""
from dataclasses import replace

import pytest

from jury.data.problems import PROMPT_SUFFIX, DataError
from jury.data.tasks import synthetic_problems
from jury.cluster.feeder import Feeder
from jury.data.prompts import NAMES, PromptFormat, load_template, resolve_template
from jury.protocol.config import DataConfig
from jury.protocol.transport import Receiver


@pytest.fixture(scope="module")
def tiny_tok(tiny_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path)


@pytest.fixture(scope="module")
def chat_tok(tiny_model_path):
    from transformers import AutoTokenizer

    from jury.models.tiny import make_tiny_chat_model

    return AutoTokenizer.from_pretrained(make_tiny_chat_model(progress=False))


def test_named_templates():
    q = "Compute 2+3."
    fill = {n: resolve_template(n).fill(q) for n in NAMES}
    assert fill["bare"] == q + PROMPT_SUFFIX == "Compute 2+3.\n"  # the embedded task's prompt, unchanged
    assert fill["boxed"] == "Compute 2+3.\nPut your final answer in \\boxed{}.\n"
    assert fill["jury-rl"] == "Compute 2+3. Let's think step by step and output the final answer within \\boxed{}."
    assert fill["derl"] == load_template("derl_original").replace("{problem}", q)
    assert fill["derl"].startswith("Compute 2+3.\nsolve the problem step by step and put the final answer in the box")
    assert fill["derl-lean"] == "Complete the lean code\nCompute 2+3.\n"


def test_a_template_file_is_used_as_written_and_filled_in_one_pass(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("Q: {problem}\nA (in \\boxed{}):", encoding="utf-8")
    t = resolve_template(str(f))
    assert t.source == str(f)
    # braces stay, and a problem that contains the placeholder is not expanded again
    assert t.fill("{problem} x^{2}") == "Q: {problem} x^{2}\nA (in \\boxed{}):"
    (tmp_path / "none.txt").write_text("no placeholder")
    with pytest.raises(DataError, match=r"data.template: .*none.txt has no \{problem\} placeholder"):
        resolve_template(str(tmp_path / "none.txt"))
    with pytest.raises(DataError, match=r"data.template: 'boxd' is neither a named template "
                                        r"\(bare, boxed, jury-rl, derl, derl-lean\) nor a file"):
        resolve_template("boxd")


def test_a_tokenizer_without_a_chat_template_gets_the_text_as_is(tiny_tok):
    fmt = PromptFormat.from_config(DataConfig(template="boxed"), tiny_tok)
    assert not fmt.chat and fmt.render("Compute 1+1.") == "Compute 1+1.\nPut your final answer in \\boxed{}.\n"
    with pytest.raises(DataError, match="data.chat_template is on, but the tokenizer of tiny has no chat template"):
        PromptFormat.from_config(DataConfig(chat_template=True), tiny_tok, model="tiny")
    with pytest.raises(DataError, match="data.system_prompt needs a chat template"):
        PromptFormat.from_config(DataConfig(system_prompt="Be brief."), tiny_tok)


def test_a_chat_template_wraps_the_text_with_the_system_prompt(chat_tok):
    fmt = PromptFormat.from_config(DataConfig(template="boxed", system_prompt="Be brief."), chat_tok)
    prompt = fmt.render("Compute 1+1.")
    assert fmt.chat and prompt == ("<|system|>\nBe brief.\n<|user|>\nCompute 1+1.\nPut your final answer in "
                                   "\\boxed{}.\n\n<|assistant|>\n")
    ids = chat_tok(prompt)["input_ids"]
    assert ids.count(chat_tok.bos_token_id) == 1 and ids[0] == chat_tok.bos_token_id
    off = PromptFormat.from_config(DataConfig(template="boxed", chat_template=False), chat_tok)
    assert off.render("Compute 1+1.") == "Compute 1+1.\nPut your final answer in \\boxed{}.\n"


def test_a_bos_written_by_the_chat_template_is_not_doubled(tiny_model_path, tmp_path):
    """Llama-style templates start with {{ bos_token }}; the generator's tokenizer adds BOS itself."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    tok.chat_template = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    prompt = PromptFormat.from_config(DataConfig(), tok).render("Compute 1+1.")
    assert prompt == "Compute 1+1.\n"
    assert tok(prompt)["input_ids"].count(tok.bos_token_id) == 1


def _sent(feeder, n):
    recv = Receiver(connect=[feeder.endpoint], name="gen", hwm=100, maxsize=100)
    try:
        feeder.admit(0, stop_at=n)
        return [recv.get(timeout=5) for _ in range(n)]
    finally:
        recv.close()
        feeder.close()


def test_the_default_feeder_sends_todays_prompts(tiny_tok):
    """`jury train` with no arguments: the synthetic problem and a newline, the tiny tokenizer has no chat template."""
    expected = [p.problem + "\n" for _, p in zip(range(4), synthetic_problems(0))]
    for tok in (None, tiny_tok):
        feeder = Feeder("synthetic", 0, batch_groups=4, window=1, host="127.0.0.1", tokenizer=tok,
                        max_prompt_tokens=128, data=DataConfig())
        assert [t.prompt for t in _sent(feeder, 4)] == expected


def test_the_feeder_sends_chat_prompts_and_wraps_what_a_mixer_wrote(chat_tok):
    class Mixer:  # as DeRL's: replaces some prompts with its own text
        def mix(self, task, problem):
            return task if task.index % 2 else replace(task, prompt="PLAN " + problem.problem)

    feeder = Feeder("synthetic", 0, batch_groups=4, window=1, host="127.0.0.1", tokenizer=chat_tok,
                    max_prompt_tokens=128, data=DataConfig(template="jury-rl"), mixer=Mixer())
    tasks = _sent(feeder, 4)
    problems = [p.problem for _, p in zip(range(4), synthetic_problems(0))]
    assert tasks[1].prompt == (f"<|user|>\n{problems[1]} Let's think step by step and output the final answer "
                               f"within \\boxed{{}}.\n<|assistant|>\n")
    assert tasks[0].prompt == f"<|user|>\nPLAN {problems[0]}\n<|assistant|>\n"
