"""OpenAIClient (verifier.llm_endpoints) against a real OpenAI-compatible server: vLLM's own
(`python -m vllm.entrypoints.openai.api_server`) on the CPU with the tiny chat model. One server
for the whole module: it takes minutes to start here."""
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from jury.cluster.llm_client import OpenAIClient
from jury.cluster.recipes import CheckerRecipe, SchemeRecipe
from jury.protocol.config import VerifierConfig
from jury.protocol.messages import PromptTask, RolloutGroup, Sample
from jury.verifiers.llm_rewards import judge_prompt, parse_verdict
from jury.verifiers.worker import VerifierWorker

pytestmark = pytest.mark.slow
KEY = "test-key-not-a-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from jury.models.registry import model_folder

    model = str(model_folder("tiny-chat"))
    port = _free_port()
    log = open(tmp_path_factory.mktemp("openai-server") / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--served-model-name",
         "tiny-chat", "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "512", "--enforce-eager",
         "--dtype", "float32", "--api-key", KEY],
        env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING"},
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 900
        while True:
            assert proc.poll() is None, f"the vLLM server exited with {proc.returncode} (log: {log.name})"
            assert time.monotonic() < deadline, "the vLLM server did not come up in 15 minutes"
            try:
                urllib.request.urlopen(f"{base}/models", timeout=5)  # answers 401 once it is up
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(2)
        yield base, model
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its engine core, which we started
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("JURY_TEST_OPENAI_KEY", KEY)
    return "JURY_TEST_OPENAI_KEY"


def test_completions_return_n_per_prompt_in_order_and_greedy_is_repeatable(server, key):
    base, _ = server
    client = OpenAIClient(f"{base}/completions", "tiny-chat", api_key_env=key)
    outs = client.generate(["Compute 5+7.\n", "Compute 2+3.\n", "Compute 9+9.\n"], n=2, temperature=1.0,
                           max_tokens=12)
    assert [len(o) for o in outs] == [2, 2, 2] and client.calls == 3
    assert all(isinstance(c.text, str) and 1 <= c.num_tokens <= 12 for o in outs for c in o)
    greedy = [client.generate(["Compute 5+7.\n"], temperature=0.0, max_tokens=12)[0][0] for _ in range(2)]
    assert greedy[0] == greedy[1]


def test_the_chat_route_applies_the_servers_chat_template(server, key):
    """Greedy, the chat route's answer to a message equals the completions route's answer to the
    token ids of that message rendered through the model's chat template (sent as ids, because the
    chat route adds no BOS of its own and a text prompt would get one): the server applied it."""
    import json

    from transformers import AutoTokenizer

    base, model = server
    tokenizer = AutoTokenizer.from_pretrained(model)
    message = "Compute 5+7."
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": message}], tokenize=False,
                                             add_generation_prompt=True)
    ids = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    request = urllib.request.Request(
        f"{base}/completions", method="POST", headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
        data=json.dumps({"model": "tiny-chat", "prompt": ids, "max_tokens": 12, "temperature": 0.0}).encode())
    with urllib.request.urlopen(request, timeout=120) as response:
        expected = json.load(response)["choices"][0]["text"]
    chat = OpenAIClient(f"{base}/chat/completions", "tiny-chat", api_key_env=key)
    assert chat.generate([message], max_tokens=12)[0][0].text == expected


def test_failures_raise_naming_the_endpoint(server, key, monkeypatch):
    base, _ = server
    with pytest.raises(RuntimeError, match=r"/v1/completions \(model nope\): HTTP 404"):
        OpenAIClient(f"{base}/completions", "nope", api_key_env=key).generate(["x"])
    monkeypatch.delenv(key)
    with pytest.raises(RuntimeError, match="HTTP 401"):  # the server wants the key
        OpenAIClient(f"{base}/completions", "tiny-chat", api_key_env=key).generate(["x"])
    closed = _free_port()  # nothing listens there
    with pytest.raises(RuntimeError, match=rf"127.0.0.1:{closed}/v1/completions \(model tiny-chat\): .*refused"):
        OpenAIClient(f"http://127.0.0.1:{closed}/v1/completions", "tiny-chat").generate(["x"])


def test_the_judge_scheme_over_the_endpoint(server, key):
    """reward=llm_judge with the judge behind the endpoint: one call per distinct answer, and each
    answer's reward is what the parse rule reads in the judge's (greedy, so repeatable) reply."""
    base, _ = server
    client = OpenAIClient(f"{base}/chat/completions", "tiny-chat", api_key_env=key)
    cfg = VerifierConfig(reward="llm_judge", judge_max_tokens=24)
    worker = VerifierWorker(cfg, "v0", checker=CheckerRecipe(cfg), scheme=SchemeRecipe(cfg, llm=client))
    try:
        task = PromptTask("t0", 0, "Compute 5+7.\n", "12", "test", problem="Compute 5+7.")
        samples = [Sample(np.arange(2, dtype=np.int32), np.zeros(2, np.float32), t, "stop")
                   for t in ("\\boxed{12}", "\\boxed{13}", "\\boxed{12}", "nothing")]
        sg = worker.score(RolloutGroup(task, np.arange(3, dtype=np.int32), samples, 0, 0, "g0", 0.1))
        assert sg.error is None and sg.counts["judge/llm_calls"] == 2 and client.calls == 2
        verdict = {a: parse_verdict(client.generate([judge_prompt("Compute 5+7.", a)], max_tokens=24)[0][0].text)
                   for a in ("12", "13")}
        assert sg.rewards.tolist() == [float(verdict["12"] is True), float(verdict["13"] is True),
                                       float(verdict["12"] is True), 0.0]
        assert sg.counts["judge/no_verdict"] == sum(v is None for v in verdict.values())
    finally:
        worker.stop()
