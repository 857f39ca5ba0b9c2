"""generator.top_p < 1: the learner scores tokens under the nucleus vLLM sampled from (learner/nucleus.py)."""
import math
import os

import pytest
import torch

from jury.learner.grpo import token_logprobs, use_fused_head
from jury.learner.nucleus import nucleus_mask, nucleus_outputs


@pytest.mark.parametrize("top_p", [0.95, 0.7, 0.3, 0.01])
def test_the_nucleus_is_vllms(top_p):
    """The mask vLLM's own sampler applies (vllm/v1/sample/ops/topk_topp_sampler.py,
    apply_top_k_top_p_pytorch, the code its CPU build runs), on random logits."""
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    z = torch.randn(64, 50, generator=torch.Generator().manual_seed(0)) * 3
    theirs = apply_top_k_top_p_pytorch(z.clone(), None, torch.full((64,), top_p)) != -math.inf
    assert torch.equal(nucleus_mask(z, top_p), theirs)
    assert (nucleus_mask(z, top_p).sum(1) >= 1).all()


def test_log_probs_and_gradient_under_the_nucleus():
    g = torch.Generator().manual_seed(1)
    head = torch.nn.Linear(8, 30, bias=False).double()
    hidden = torch.randn(2500, 8, generator=g, dtype=torch.float64, requires_grad=True)  # > one chunk of rows
    with torch.no_grad():
        keep = nucleus_mask(head(hidden), 0.8)
    targets = torch.multinomial(keep.double(), 1, generator=g).squeeze(1)  # tokens inside the nucleus
    logp, entropy = nucleus_outputs(head, hidden, targets, 0.8)
    z = head(hidden)
    want = z.gather(1, targets[:, None]).squeeze(1) - torch.logsumexp(z.masked_fill(~keep, -math.inf), -1)
    torch.testing.assert_close(logp, want, rtol=1e-6, atol=1e-6)
    assert nucleus_outputs.outside == 0
    # the entropy is the whole distribution's (RENT's reward, satrams/rent-rl@5d4d38a
    # verl/utils/torch_functional.py entropy_from_logits: over every token), not the nucleus's
    full = torch.softmax(z, -1)
    torch.testing.assert_close(entropy, -(full * torch.log(full)).sum(-1), rtol=1e-6, atol=1e-6)
    p = torch.softmax(z.masked_fill(~keep, -math.inf), -1)
    truncated = -(p * torch.log(p.clamp_min(1e-300))).sum(-1)
    assert (entropy - truncated).min() > -1e-9 and (entropy - truncated).max() > 0.1  # the nucleus's is lower
    # the gradient through the checkpointed chunks is the plain one
    (g1,) = torch.autograd.grad(logp.sum(), hidden)
    (g2,) = torch.autograd.grad(want.sum(), hidden)
    torch.testing.assert_close(g1, g2, rtol=1e-6, atol=1e-8)
    # a token outside the nucleus (a policy that moved) is scored under the whole distribution
    outside = (~keep).float().argmax(1)[:5]
    lp, _ = nucleus_outputs(head, hidden[:5].detach(), outside, 0.8)
    assert nucleus_outputs.outside == int((~keep[:5]).any(1).sum())
    assert torch.isfinite(lp).all()


@pytest.mark.slow
def test_the_ratio_is_one_at_staleness_zero(tiny_model_path):
    """vLLM samples with top_p = 0.8 and returns its processed log-probs (over the nucleus); the
    learner, with the same weights, scores the same tokens: the ratio is 1 (to float32 rounding)."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from vllm import LLM, SamplingParams

    from jury.actors.cpu_engine import in_process_cpu_engine

    # the engine in this process, as `jury eval` runs it: no engine core and worker to start (about 20 s)
    with in_process_cpu_engine():
        llm = LLM(model=tiny_model_path, logprobs_mode="processed_logprobs", enforce_eager=True, max_model_len=128,
                  seed=0, dtype="float32")
        try:
            prompts = ["Compute 5+7.\n", "Compute 12-30.\n", "Compute 3*9.\n"]
            params = SamplingParams(n=4, temperature=0.9, top_p=0.8, max_tokens=12, logprobs=0, seed=0)
            outs = llm.generate(prompts, params, use_tqdm=False)
        finally:
            llm.llm_engine.engine_core.shutdown(timeout=30)
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    model = use_fused_head(AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)).eval()
    gaps, plain = [], []
    for out in outs:
        prompt = tok(out.prompt)["input_ids"]
        for c in out.outputs:
            ids = torch.tensor([prompt + list(c.token_ids)])
            comp = torch.zeros(1, ids.shape[1] - 1)
            comp[0, len(prompt) - 1:] = 1
            behav = torch.tensor([lp[t].logprob for lp, t in zip(c.logprobs, c.token_ids)])
            with torch.no_grad():
                ours, _ = token_logprobs(model, ids, torch.ones_like(ids), comp, 0.9, top_p=0.8)
                full, _ = token_logprobs(model, ids, torch.ones_like(ids), comp, 0.9)
            gaps.append((ours[0, len(prompt) - 1:] - behav).abs().max().item())
            plain.append((full[0, len(prompt) - 1:] - behav).abs().max().item())
    assert max(gaps) < 2e-4, gaps           # log ratio 0: ratio 1
    assert max(plain) > 1e-2, plain         # without the nucleus the learner's log-probs are biased low
