"""CoReward's rewrites: Co-rewarding-I's prompt and parse rule, the dataset's column, and the
driver's rewriter (ahead of admission, in the background, never blocking the feeder)."""
import json
import threading
import time

import pytest

from jury.cluster.feeder import Feeder
from jury.cluster.rewrite import Rewriter
from jury.data.problems import DataError, Problem
from jury.data.tasks import chain_problems
from jury.protocol.config import DataConfig, VerifierConfig
from jury.protocol.transport import Receiver
from jury.verifiers.coreward import parse_rewrite, rewrite_prompt
from jury.verifiers.llm import Completion


def test_the_prompt_is_co_rewarding_is_and_its_reply_is_read_between_the_markers():
    prompt = rewrite_prompt("  Compute 18+19.\n")
    assert prompt.startswith("You are given a math problem. Please rewrite it using different wording and a "
                             "different real-world scenario, while keeping the underlying mathematical meaning")
    assert prompt.endswith("### RESULT_START\nORIGINAL:\n<original question>\nREWRITE:\n<rewritten question>\n"
                           "### RESULT_END\n\nCompute 18+19.")  # instruction + "\n" + question.strip()
    ok = "Sure.\n### RESULT_START\nORIGINAL:\nCompute 18+19.\nREWRITE:\nA baker adds 18 and 19 rolls.\n### RESULT_END\n"
    assert parse_rewrite(ok) == "A baker adds 18 and 19 rolls."
    assert parse_rewrite(ok.replace("### RESULT_END", "")) is None          # no end marker
    assert parse_rewrite(ok.replace("REWRITE:", "NEW:")) is None            # no REWRITE: part
    assert parse_rewrite("### RESULT_END ### RESULT_START REWRITE: x") is None  # end before start
    assert parse_rewrite("### RESULT_START\nREWRITE:\n \n### RESULT_END") is None  # empty: refused
    # split once: a REWRITE: inside the rewrite stays in it, as theirs (split('REWRITE:', 1))
    assert parse_rewrite("### RESULT_START REWRITE: a REWRITE: b ### RESULT_END") == "a REWRITE: b"


class SlowRewriter:
    """An LLMClient that rewrites "Compute X." as "Find X." once `release` is set; "Compute 1+1."
    gets a reply without the markers. It records each batch it was asked."""

    def __init__(self, fail=False):
        self.release, self.batches, self.fail = threading.Event(), [], fail

    def generate(self, prompts, *, n=1, temperature=0.0, max_tokens=512):
        self.batches.append(len(prompts))
        self.release.wait(10)
        if self.fail:
            raise TimeoutError("rewriter unreachable")
        out = []
        for p in prompts:
            question = p.rsplit("\n", 1)[1]
            text = ("no markers" if question == "Compute 1+1." else
                    f"### RESULT_START\nORIGINAL:\n{question}\nREWRITE:\n{question.replace('Compute', 'Find')}\n"
                    "### RESULT_END")
            out.append([Completion(text, 5)] * n)
        return out


def _wait_idle(rewriter):
    deadline = time.monotonic() + 10
    while rewriter.request_in_flight is not None and rewriter.request_in_flight.is_alive():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_rewrites_are_asked_ahead_in_the_background_and_a_task_never_waits_for_one():
    cfg = VerifierConfig(reward="coreward", rewrites="llm", rewrite_ahead=6, rewrite_batch=4)
    llm = SlowRewriter()
    rewriter = Rewriter(cfg, llm)
    feeder = Feeder("chain", 0, batch_groups=2, window=1, host="127.0.0.1", mixer=rewriter, ahead=rewriter.ahead)
    recv = Receiver(connect=[feeder.endpoint], name="gen", hwm=100, maxsize=100)
    try:
        time.sleep(0.2)
        assert llm.batches == [4]  # asked at construction, before any admission
        assert feeder.admit(version=0, stop_at=100) == 2  # the rewriter holds its answer: nothing waits
        first = [recv.get(timeout=5) for _ in range(2)]
        assert [t.rewrite for t in first] == [None, None]
        assert all(t.problem and t.prompt == t.problem + "\n" for t in first)
        llm.release.set()
        _wait_idle(rewriter)
        feeder.admit(version=1, stop_at=100)  # problems 2 and 3 were in the first batch: rewritten by now
        tasks = [recv.get(timeout=5) for _ in range(2)]
        expected = [p for _, p in zip(range(4), chain_problems(0))][2:]
        assert [t.problem for t in tasks] == [p.problem for p in expected]  # the same stream, in order
        assert [t.rewrite for t in tasks] == [p.problem.replace("Compute", "Find") + "\n" for p in expected]
        metrics = rewriter.after_step()
        assert metrics["coreward/admitted_without_rewrite"] == 2 and metrics["coreward/rewrites_written"] >= 4
        assert metrics["coreward/llm_calls"] == sum(llm.batches) and all(b <= 4 for b in llm.batches)
    finally:
        llm.release.set()
        recv.close()
        feeder.close()


def test_a_failed_request_is_counted_and_asked_again_and_a_broken_reply_is_not():
    cfg = VerifierConfig(reward="coreward", rewrites="llm", rewrite_ahead=2, rewrite_batch=8)
    llm = SlowRewriter(fail=True)
    llm.release.set()
    rewriter = Rewriter(cfg, llm)
    stream = rewriter.ahead(iter([Problem("Compute 1+1.", "2", "s"), Problem("Compute 2+2.", "4", "s"),
                                  Problem("Compute 3+3.", "6", "s")]))
    _wait_idle(rewriter)
    llm.fail = False
    assert rewriter.after_step()["coreward/rewrites_failed"] == 3  # and it sends the three again
    _wait_idle(rewriter)
    metrics = rewriter.after_step()
    assert (metrics["coreward/rewrites_written"], metrics["coreward/rewrites_unparsable"]) == (2, 1)
    assert llm.batches == [3, 3]
    from jury.protocol.messages import PromptTask

    tasks = [rewriter.mix(PromptTask(f"t{i}", i, p.problem, p.answer, "s"), p) for i, p in enumerate(stream)]
    assert [t.rewrite for t in tasks] == [None, "Find 2+2.", "Find 3+3."]
    assert rewriter.after_step()["coreward/admitted_without_rewrite"] == 1
    assert llm.batches == [3, 3]  # the unparsable reply is cached: not asked again


def test_the_dataset_column_is_the_rewrite_and_a_long_one_is_dropped(tmp_path):
    from transformers import AutoTokenizer

    from jury.models.registry import model_folder

    rows = [{"problem": "Compute 18+19.", "answer": "37", "rewrite": "A baker adds 18 and 19 rolls."},
            {"problem": "Compute 2+3.", "answer": "5", "rewrite": "Add three to two " * 40}]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = DataConfig(rewrite_key="rewrite", shuffle=False, template="boxed")
    tokenizer = AutoTokenizer.from_pretrained(model_folder("tiny"))
    feeder = Feeder(str(path), 0, batch_groups=2, window=1, host="127.0.0.1", data=data, tokenizer=tokenizer,
                    max_prompt_tokens=64)
    recv = Receiver(connect=[feeder.endpoint], name="gen", hwm=10, maxsize=10)
    try:
        feeder.admit(version=0, stop_at=2)
        first, second = recv.get(timeout=5), recv.get(timeout=5)
        assert first.rewrite == "A baker adds 18 and 19 rolls.\nPut your final answer in \\boxed{}.\n"
        assert first.problem == "Compute 18+19." and second.rewrite is None  # over 64 tokens: dropped
        assert feeder.rewrite_too_long == 1
    finally:
        recv.close()
        feeder.close()
    path.write_text(json.dumps({"problem": "Compute 1+1.", "answer": "2", "rewrite": ""}) + "\n")
    from jury.data.files import check_dataset

    with pytest.raises(DataError, match="rewrite: empty"):
        check_dataset(str(path), data)
