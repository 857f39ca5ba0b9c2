"""The monitor's shadow metrics (learner/shadow.py), worked by hand on constructed groups: the
reward's precision and recall against the labels by staleness bucket, consensus, short paid
answers against the run's median, and the KL to the first policy."""
import math

import numpy as np
import pytest
import torch

from jury.learner.grpo import Batch
from jury.learner.shadow import Shadow, agreement, consensus, initial_kl, paid, short_paid
from jury.protocol.config import MonitorConfig
from jury.protocol.messages import PromptTask, RolloutGroup, Sample, ScoredGroup, Verdict
from jury.protocol.plan import Sampling

from test_update import LogitsAreWeights  # the stand-in decoder of the update tests


def _group(rewards, verdicts=None, *, version_start=5, lengths=None, label="7", views=None, vote_share=0.5,
           majority_verdict=None, gate=None, index=0):
    g = len(rewards)
    lengths = lengths or [10] * g
    views = views or [0] * g
    task = PromptTask(task_id=f"t{index}", index=index, prompt="p", label=label, source="s")
    samples = [Sample(np.zeros(n, np.int32), np.zeros(n, np.float32), "", "stop", view=v)
               for n, v in zip(lengths, views)]
    group = RolloutGroup(task, np.array([1], np.int32), samples, version_start, version_start, "g", 0.0)
    verdicts = [Verdict(k, "math", 0.0) for k in (verdicts or ["incorrect"] * g)]
    return ScoredGroup(group, verdicts, np.array(rewards, np.float32), "s", "a", vote_share, gate, 1, 0.0,
                       majority_verdict=majority_verdict)


def test_precision_and_recall_by_staleness_by_hand():
    # ResZero on keys a, a, a, b (c = 0.01): alpha = 3/4, gamma = c alpha^2 = 0.005625; the majority gets
    # -c alpha + gamma = -0.001875, the lone residual gamma: only the residual is above the mean 0
    reszero = [-0.001875, -0.001875, -0.001875, 0.005625]
    groups = [
        # staleness 0 (trained at step 5, made by version 5)
        _group([1, 1, 0, 0], ["correct", "incorrect", "correct", "incorrect"]),  # paid 2, correct 2, both 1
        _group([1, 0, 0, 0], ["correct", "correct", "incorrect", "no_answer"]),  # paid 1, correct 2, both 1
        # staleness 1
        _group(reszero, ["correct", "correct", "correct", "incorrect"], version_start=4),  # paid 1, correct 3
        _group([1, 1, 1, 1], ["correct"] * 4, version_start=4),  # flat: pays nothing, left out
        _group([1, 0], ["timeout", "correct"], version_start=4),  # a timeout says nothing: correct 1
    ]
    m = agreement(groups, step=5)
    assert m["shadow/precision/stale0"] == pytest.approx(2 / 3) and m["shadow/recall/stale0"] == 2 / 4
    assert m["shadow/precision/stale1"] == 0.0 and m["shadow/recall/stale1"] == 0 / 4
    assert m["shadow/precision"] == 2 / 4 and m["shadow/recall"] == 2 / 8


def test_without_labels_or_signal_precision_and_recall_are_nan():
    m = agreement([_group([1, 0], ["inconclusive"] * 2, label=None), _group([1, 1], ["correct"] * 2)], step=5)
    assert math.isnan(m["shadow/precision"]) and math.isnan(m["shadow/recall"])


def test_paid_is_above_the_mean_of_its_own_view():
    # CoReward: each view is normalised apart; over the whole group (mean 0.75) samples 0, 2, 3 would be paid
    g = _group([1, 0, 1, 1], views=[0, 0, 1, 1])
    assert paid(g).tolist() == [True, False, False, False]
    assert paid(_group([0.1] * 8)).tolist() == [False] * 8  # a flat group's float mean is no payment


def test_consensus_on_a_wrong_or_unproved_answer_by_hand():
    groups = [_group([1, 0], vote_share=0.75, majority_verdict="incorrect", gate="inconclusive"),  # agreed
              _group([1, 0], vote_share=1.0, majority_verdict="correct", gate="proved"),  # agreed
              _group([1, 0], vote_share=0.5, majority_verdict="incorrect", gate="inconclusive"),
              _group([1, 0], vote_share=0.875, label=None)]  # agreed; no label, no gate
    m = consensus(groups, share=0.75)
    assert m == {"shadow/consensus": 3 / 4, "shadow/consensus_wrong": 1 / 3, "shadow/consensus_unproved": 1 / 3}


def test_short_paid_samples_against_a_median():
    # shorter than 0.25 x 20 = 5 tokens: samples 0 and 2; paid: 0 and 1
    assert short_paid([_group([1, 1, 0, 0], lengths=[2, 30, 3, 40])], median=20, ratio=0.25) == 1 / 4


def test_short_is_against_the_run_median_not_the_step_median():
    shadow = Shadow(MonitorConfig(short_ratio=0.25))
    first = shadow.step([_group([1, 0, 0, 0], lengths=[10] * 4)], step=0)
    assert first["shadow/median_len"] == 10 and first["shadow/short_paid"] == 0.0
    # a step collapsed to 2-token answers: short against the run's 10, not its own median of 2
    second = shadow.step([_group([1, 0, 0, 0], lengths=[2] * 4)], step=1)
    assert second["shadow/median_len"] == 10 and second["shadow/short_paid"] == 1 / 4
    assert shadow.step([_group([1, 0])], step=2)["shadow/median_len"] == (2 + 10) / 2


def test_kl_to_the_first_policy_by_hand():
    # the first policy's logits are 0: p = 1/2 for each token; the generators sampled with p = 1/4, so
    # d = log(1/2) - log(1/4) = log 2 and the k3 estimate is e^d - d - 1 = 1 - log 2 on every token
    ids = torch.tensor([[0, 0], [0, 1]])
    batch = Batch(ids, torch.ones_like(ids), torch.ones(2, 1), torch.full((2, 1), math.log(0.25)),
                  torch.zeros(2), torch.zeros(2), 2)
    assert initial_kl(LogitsAreWeights(), batch, 16, Sampling(1.0, 1.0, 1), 8) == pytest.approx(1 - math.log(2))
    same = Batch(ids, torch.ones_like(ids), torch.ones(2, 1), torch.full((2, 1), math.log(0.5)),
                 torch.zeros(2), torch.zeros(2), 2)
    assert initial_kl(LogitsAreWeights(), same, 1, Sampling(1.0, 1.0, 1), 8) == pytest.approx(0.0, abs=1e-7)


class Shapes(torch.nn.Module):
    """A Hugging Face model whose decoder notes the shape of every input it is given."""

    def __init__(self, model):
        super().__init__()
        self.model, self.shapes = model, []

    def get_decoder(self):
        def decoder(input_ids, attention_mask, use_cache=True):
            self.shapes.append(tuple(input_ids.shape))
            return self.model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask, use_cache=use_cache)
        return decoder

    def get_output_embeddings(self):
        return self.model.get_output_embeddings()


def test_kl_to_the_first_policy_in_micro_batches_cut_to_their_rows(tiny_model_path):
    """Rows of 5 to 60 tokens: the estimate is the same in micro-batches of 1, 3 or all rows, and
    with micro-batches of 3 no forward pads a short row to the longest (the one forward of every
    row at the longest's width took more time than the update on the chain task)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32).eval()
    lengths = [60, 5, 9, 33, 6, 14, 7]  # prompt 2 tokens + completion
    n, width = len(lengths), max(lengths)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (n, width), generator=gen)
    attention = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    completion = attention[:, 1:].float()
    completion[:, 0] = 0.0  # position 0 predicts the prompt's second token
    behav = torch.where(completion > 0, -torch.rand(n, width - 1, generator=gen) * 8, 0.0)
    batch = Batch(ids, attention, completion, behav, torch.zeros(n), torch.zeros(n), 1)
    sampling = Sampling(1.0, 1.0, 1)
    one_forward = initial_kl(model, batch, n, sampling, n)
    assert one_forward > 0
    for micro_batch in (1, 3):
        assert initial_kl(model, batch, n, sampling, micro_batch) == pytest.approx(one_forward, rel=1e-5)
    watched = Shapes(model)
    initial_kl(watched, batch, n, sampling, 3)
    # sorted 5 6 7 | 9 14 33 | 60: each forward as wide as its own longest row
    assert watched.shapes == [(3, 7), (3, 33), (1, 60)]
    # rows: 4 of the 7, evenly spaced (0, 2, 4, 6: lengths 60, 9, 6, 7), in one micro-batch of 3 and one of 1
    watched.shapes.clear()
    initial_kl(watched, batch, 4, sampling, 3)
    assert watched.shapes == [(3, 9), (1, 60)]
