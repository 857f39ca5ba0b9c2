"""How the self-rewards rank a group's samples, against the sources' own measures.

    python benchmarks/self_rewards.py [--prompts 48] [--group 8] [--model tiny-chain]

Samples G completions of chain problems (long-tailed lengths) from a local model, then for each
sample computes the sources' measures from the model's full logits, written here from their code:
Intuitor's self-certainty, mean_t (LSE(z_t) - mean_j z_tj) (sunblaze-ucb/Intuitor @ 3f0cdd7b,
self_certainty_from_logits), and RENT's reward, -mean_t H(p_t) (satrams/rent-rl @ 5d4d38a7,
entropy_from_logits). Beside them: jury-rl's learner scores (learner/self_rewards.py), and what
jury-rl computed before (the sum, and the mean, of the sampled tokens' log-probs). Prints the
Spearman correlation within each group, averaged over groups: how far each reward orders the
group as its source does.
"""
from __future__ import annotations

import argparse
import math
import random

import numpy as np
import torch


def spearman(a, b) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    if np.std(ra) == 0 or np.std(rb) == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=48)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--model", default="tiny-chain")
    p.add_argument("--max-new-tokens", type=int, default=160)
    args = p.parse_args(argv)

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from jury.data.problems import PROMPT_SUFFIX
    from jury.data.tasks import chain_problem
    from jury.learner.grpo import token_logprobs, use_fused_head
    from jury.learner.self_rewards import row_scores
    from jury.models.registry import resolve_model

    torch.manual_seed(0)
    path = resolve_model(args.model, progress=False)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    fused = use_fused_head(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)).eval()
    rng = random.Random(0)
    columns = {k: [] for k in ("old_self_certainty", "old_entropy", "self_certainty", "entropy")}
    lengths = []
    for _ in range(args.prompts):
        prompt = chain_problem(rng).problem + PROMPT_SUFFIX
        enc = tok([prompt] * args.group, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, max_new_tokens=args.max_new_tokens,
                                 pad_token_id=tok.pad_token_id)
        n_prompt = enc["input_ids"].shape[1]
        rows = []
        for seq in out:
            comp = seq[n_prompt:].tolist()
            if tok.eos_token_id in comp:
                comp = comp[: comp.index(tok.eos_token_id) + 1]
            rows.append(enc["input_ids"][0].tolist() + comp)
        width = max(map(len, rows))
        ids = torch.full((len(rows), width), tok.pad_token_id)
        attn = torch.zeros_like(ids)
        mask = torch.zeros(len(rows), width - 1)
        for i, r in enumerate(rows):
            ids[i, : len(r)], attn[i, : len(r)] = torch.tensor(r), 1
            mask[i, n_prompt - 1: len(r) - 1] = 1
        with torch.no_grad():
            z = model(input_ids=ids, attention_mask=attn).logits[:, :-1].double()  # position t predicts t+1
            logp_sampled, entropy, certainty = token_logprobs(fused, ids, attn, mask, 1.0, certainty=True)
        # the sources' measures, from the full logits (their code's arithmetic)
        intuitor = ((torch.logsumexp(z, -1) - z.mean(-1)) * mask).sum(1) / mask.sum(1)
        rent = -((torch.logsumexp(z, -1) - (torch.softmax(z, -1) * z).sum(-1)) * mask).sum(1) / mask.sum(1)
        group = {"old_self_certainty": (logp_sampled.double() * mask).sum(1),        # jury-rl before: sum log p(y_t)
                 "old_entropy": (logp_sampled.double() * mask).sum(1) / mask.sum(1),  # mean log p(y_t)
                 "self_certainty": row_scores(certainty.double(), mask),
                 "entropy": row_scores(-entropy.double(), mask)}
        reference = {"old_self_certainty": intuitor, "self_certainty": intuitor, "old_entropy": rent, "entropy": rent}
        for k, v in group.items():
            columns[k].append(spearman(v.numpy(), reference[k].numpy()))
        lengths.append(mask.sum(1).numpy())
    lengths = np.concatenate(lengths)
    print(f"{args.prompts} groups of {args.group} chain completions from {args.model}: "
          f"{lengths.min():.0f} to {lengths.max():.0f} tokens (median {np.median(lengths):.0f})")
    print("| reward | source's measure | Spearman within a group, mean (min) |")
    print("|---|---|---|")
    for k, ref in (("old_self_certainty", "Intuitor"), ("self_certainty", "Intuitor"),
                   ("old_entropy", "RENT"), ("entropy", "RENT")):
        v = np.array([x for x in columns[k] if not math.isnan(x)])
        print(f"| {k} | {ref} | {v.mean():.3f} ({v.min():.3f}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
