"""PPO mini-batches, decoupled PPO and the off-policy corrections, worked by hand on a model whose
logits are its weights, and the learning-rate schedule against its formula."""
import math

import pytest
import torch

from jury.learner.grpo import Batch
from jury.learner.schedule import lr_factor
from jury.learner.shard import Shard
from jury.learner.update import step_stats, train_shard
from jury.protocol.plan import Sampling
from jury.protocol.config import LearnerConfig


class LogitsAreWeights(torch.nn.Module):
    """logits = W[:, 0] whatever the input: a 2-token vocabulary, logp_t = W_t - logsumexp(W)."""

    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(1, 2, bias=False)
        torch.nn.init.zeros_(self.head.weight)

    def get_decoder(self):
        return self

    def get_output_embeddings(self):
        return self.head

    def forward(self, input_ids, attention_mask, use_cache=True):  # a Hugging Face decoder's arguments
        return type("Out", (), {"last_hidden_state": torch.ones(*input_ids.shape, 1)})


class SgdEngine:
    """The DeepSpeed engine methods train_shard calls, over plain SGD on one rank."""

    def __init__(self, module, lr):
        self.module, self.opt = module, torch.optim.SGD(module.parameters(), lr=lr)

    def train(self):
        self.module.train()

    def zero_optimization(self):
        return False

    def set_gradient_accumulation_boundary(self, boundary):
        pass

    def backward(self, loss, scale_wrt_gas=False):
        loss.backward()

    def step(self):
        self.opt.step()
        self.opt.zero_grad()

    def zero_grad(self):
        self.opt.zero_grad()


def _shard(behav_p: float, minibatches: int = 2) -> Shard:
    """Row A samples token 0 with advantage +1 (mini-batch 0), row B token 1 with -1 (mini-batch 1,
    or 0 with one mini-batch)."""
    ids = torch.tensor([[0, 0], [0, 1]])
    behav = torch.full((2, 1), math.log(behav_p))
    return Shard(Batch(ids, torch.ones_like(ids), torch.ones(2, 1), behav, torch.tensor([1.0, -1.0]),
                       torch.tensor([1.0, 0.0]), 2),
                 minibatch=torch.tensor([0, 1]) if minibatches == 2 else torch.tensor([0, 0]),
                 tokens=torch.tensor([2.0 / minibatches] * minibatches, dtype=torch.float64),
                 seqs=torch.tensor([2.0 / minibatches] * minibatches, dtype=torch.float64))


def _train(cfg, behav_p):
    model = LogitsAreWeights()
    sums = train_shard(SgdEngine(model, lr=1.0), _shard(behav_p, cfg.minibatches), cfg, ref_model=None, sampling=Sampling(1.0, 1.0, 1), pad_id=0, timers={})
    return model.head.weight[:, 0].tolist(), {k: v / sums["weight"] for k, v in sums.items() if k != "weight"}


def test_a_correction_clips_the_second_mini_batch_against_the_proximal_policy():
    # proximal policy = the weights before the batch's first update: W = (0, 0), p = (1/2, 1/2);
    # behaviour p = 1/4 for both tokens, so the behaviour weight is min(0.5 / 0.25, cap 1.5) = 1.5
    # (tis_token: truncated at the cap).
    # mini-batch 0 (A = +1): ratio 1, loss -1.5 r, dloss/dW = -1.5 (1 - p0, -p1) = (-0.75, 0.75):
    #   W = (0.75, -0.75) after SGD with lr 1.
    # mini-batch 1 (A = -1): p1 = 1 / (1 + e^1.5) = 0.18243, ratio = p1 / 0.5 = 0.36486 < 1 - 0.2:
    #   clipped, no gradient, W stays. clip_frac = 1/2, ratio_mean = (1 + 0.36486) / 2, tis_frac = 1.
    cfg = LearnerConfig(correction="tis_token", is_cap=1.5, minibatches=2, micro_batch=1, advantage="grpo")
    w, stats = _train(cfg, behav_p=0.25)
    assert w == pytest.approx([0.75, -0.75], abs=1e-6)
    r = (1 / (1 + math.exp(1.5))) / 0.5
    assert stats["ratio_mean"] == pytest.approx((1 + r) / 2, abs=1e-6)
    assert stats["clip_frac"] == pytest.approx(0.5) and stats["tis_frac"] == pytest.approx(1.0)


def test_without_correction_the_ratio_is_taken_against_the_behaviour_policy():
    # old = behaviour p = 1/4: mini-batch 0's ratio is 0.5 / 0.25 = 2 > 1 + 0.2 with A = +1: clipped,
    # no update; mini-batch 1's ratio is also 2 (W unchanged), A = -1: not clipped (r > 1 - 0.2),
    # loss = 2, dloss/dW = -(-1) r (-p0, 1 - p1) = 2 (-0.5, 0.5) = (-1, 1): W = (1, -1).
    cfg = LearnerConfig(minibatches=2, micro_batch=1, advantage="grpo")
    w, stats = _train(cfg, behav_p=0.25)
    assert w == pytest.approx([1.0, -1.0], abs=1e-6)
    assert stats["ratio_mean"] == pytest.approx(2.0) and stats["clip_frac"] == pytest.approx(0.5)


def test_one_mini_batch_runs_at_the_proximal_policy_itself():
    # a correction with one update per batch: the ratio is exactly 1 and nothing is clipped
    # (what the docs say about minibatches = epochs = 1)
    cfg = LearnerConfig(correction="decoupled", is_cap=1.5, minibatches=1, micro_batch=2, advantage="grpo")
    w, stats = _train(cfg, behav_p=0.25)
    assert stats["ratio_mean"] == pytest.approx(1.0) and stats["clip_frac"] == 0.0


def test_two_epochs_repeat_the_mini_batches():
    cfg = LearnerConfig(correction="decoupled", is_cap=1.5, minibatches=2, epochs=2, micro_batch=1, advantage="grpo")
    model = LogitsAreWeights()
    engine = SgdEngine(model, lr=1.0)
    steps = []
    engine.step = (lambda step: lambda: (steps.append(1), step())[1])(engine.step)
    train_shard(engine, _shard(0.25), cfg, ref_model=None, sampling=Sampling(1.0, 1.0, 1), pad_id=0, timers={})
    assert len(steps) == 4  # epochs x mini-batches optimizer steps


def _two_token_shard(behav_p: tuple[float, float]) -> Shard:
    """One row: a prompt token, then two completion tokens, both token 0, advantage +1."""
    ids = torch.tensor([[0, 0, 0]])
    behav = torch.tensor([[math.log(p) for p in behav_p]])
    return Shard(Batch(ids, torch.ones_like(ids), torch.ones(1, 2), behav, torch.tensor([1.0]),
                       torch.tensor([1.0]), 1),
                 minibatch=torch.tensor([0]), tokens=torch.tensor([2.0], dtype=torch.float64),
                 seqs=torch.tensor([1.0], dtype=torch.float64))


# Each correction on the row above, behaviour p = (1/4, 1/8) for its two tokens. One update, at the
# proximal policy W = (0, 0), p0 = 1/2: the ratio is 1, so w = (0.5 / 0.25, 0.5 / 0.125) = (2, 4);
# product 8, geometric mean sqrt(8) = 2.828. Token-mean loss -(f_1 r_1 + f_2 r_2) / 2, each
# dlogp0/dW = (1 - p0, -p1) = (1/2, -1/2): SGD with lr 1 gives W = (f_1 + f_2) / 4 * (1, -1).
@pytest.mark.parametrize("correction, bounds, f, truncated, masked", [
    ("tis_token", dict(is_cap=3.0), (2, 3), 0.5, 0.0),               # token 2 truncated to 3
    ("decoupled", dict(is_cap=3.0), (2, 0), 0.0, 0.5),               # AReaL: token 2 over the cap, masked
    ("decoupled", dict(is_cap=4.0), (2, 4), 0.0, 0.0),               # on the cap: kept, weighted by w itself
    ("tis_seq", dict(is_cap=3.0), (3, 3), 1.0, 0.0),                 # product 8 truncated to 3, both tokens
    ("mask_token", dict(mask_low=0.5, mask_high=3.0), (2, 0), 0.0, 0.5),   # token 2 outside the band
    ("mask_seq", dict(mask_low=0.5, mask_high=3.0), (8 ** 0.5, 8 ** 0.5), 0.0, 0.0),  # 2.828 inside
    ("mask_seq", dict(mask_low=0.5, mask_high=2.5), (0, 0), 0.0, 1.0),     # 2.828 outside: no gradient
    ("mask_seq_product", dict(mask_low=0.5, mask_high=10.0), (8, 8), 0.0, 0.0),  # TRL: product 8 inside
    ("mask_seq_product", {}, (0, 0), 0.0, 1.0),                      # TRL's default band (0, 3]: 8 masked
])
def test_each_correction_by_hand(correction, bounds, f, truncated, masked):
    cfg = LearnerConfig(correction=correction, **bounds, micro_batch=1, advantage="grpo")
    model = LogitsAreWeights()
    sums = train_shard(SgdEngine(model, lr=1.0), _two_token_shard((0.25, 0.125)), cfg, ref_model=None,
                       sampling=Sampling(1.0, 1.0, 2), pad_id=0, timers={})
    step = (f[0] + f[1]) / 4
    assert model.head.weight[:, 0].tolist() == pytest.approx([step, -step], abs=1e-6)
    stats = step_stats(sums, cfg)
    assert stats["tis_frac"] == pytest.approx(truncated) and stats["mask_frac"] == pytest.approx(masked)
    # ESS = (f_1 + f_2)^2 / (2 (f_1^2 + f_2^2)): 25/26 for (2, 3), 1/2 for (2, 0), 0 with no weight left
    ess = (f[0] + f[1]) ** 2 / (2 * (f[0] ** 2 + f[1] ** 2)) if any(f) else 0.0
    assert stats["is_ess"] == pytest.approx(ess, abs=1e-6)
    # learner-behaviour KL, k3 per token from w itself: ((2 - log 2 - 1) + (4 - log 4 - 1)) / 2
    assert stats["behav_kl"] == pytest.approx((4 - math.log(8)) / 2, abs=1e-6)
    assert stats["ratio_mean"] == pytest.approx(1.0)


def test_recompute_old_without_a_correction_reports_the_behaviour_kl():
    """recompute_old with no correction takes the ratio against π_prox, so approx_kl (to π_prox) is 0
    at a step's one update: the learner-behaviour gap is then behav_kl, k3 of w = π_prox / π_behav per
    token, as a correction reports it (it was logged nowhere; outside audit). Behaviour p = (1/4, 1/8),
    π_prox p0 = 1/2: w = (2, 4)."""
    cfg = LearnerConfig(recompute_old=True, micro_batch=1, advantage="grpo")
    sums = train_shard(SgdEngine(LogitsAreWeights(), lr=1.0), _two_token_shard((0.25, 0.125)), cfg, ref_model=None,
                       sampling=Sampling(1.0, 1.0, 2), pad_id=0, timers={})
    stats = step_stats(sums, cfg)
    assert stats["behav_kl"] == pytest.approx((4 - math.log(8)) / 2, abs=1e-6)
    assert stats["approx_kl"] == pytest.approx(0.0, abs=1e-9) and "reject_frac" not in stats
    plain_cfg = LearnerConfig(micro_batch=1, advantage="grpo")
    plain = step_stats(train_shard(SgdEngine(LogitsAreWeights(), lr=1.0), _two_token_shard((0.25, 0.125)), plain_cfg,
                                   ref_model=None, sampling=Sampling(1.0, 1.0, 2), pad_id=0, timers={}), plain_cfg)
    # without π_prox the ratio is against π_behav, and approx_kl is the behaviour gap itself: k3 of
    # π_behav / π_θ = (1/2, 1/4) per token, ((1/2 + log 2 - 1) + (1/4 + log 4 - 1)) / 2
    assert "behav_kl" not in plain
    assert plain["approx_kl"] == pytest.approx((0.75 + math.log(8) - 2) / 2, abs=1e-6)


def test_mask_drops_a_sample_outside_the_band_and_its_gradient_is_zero():
    # one mini-batch holding row A (token 0, A = +1, behaviour p 1/4: w = 2) and row B (token 1,
    # A = -1, behaviour p 1/2: w = 1). Band [0.5, 1.5] masks A: only B's loss r / 2 is left,
    # dlogp1/dW = (-1/2, 1/2), so W = -(1/2)(-1/2, 1/2) = (0.25, -0.25). With a band that keeps A,
    # A adds its weight 2: -2 r / 2, dlogp0/dW = (1/2, -1/2), W = (0.25, -0.25) + (0.5, -0.5).
    shard = _shard(0.25, minibatches=1)
    shard.batch.behav_logp[1] = math.log(0.5)
    for high, expected, masked in ((1.5, [0.25, -0.25], 0.5), (2.5, [0.75, -0.75], 0.0)):
        cfg = LearnerConfig(correction="mask_token", mask_low=0.5, mask_high=high, micro_batch=2, advantage="grpo")
        model = LogitsAreWeights()
        sums = train_shard(SgdEngine(model, lr=1.0), shard, cfg, ref_model=None, sampling=Sampling(1.0, 1.0, 1), pad_id=0, timers={})
        assert model.head.weight[:, 0].tolist() == pytest.approx(expected, abs=1e-6)
        assert step_stats(sums, cfg)["mask_frac"] == pytest.approx(masked)
    # A alone, masked: not a single step anywhere
    alone = Shard(Batch(*(getattr(shard.batch, k)[:1] for k in ("input_ids", "attention", "completion", "behav_logp",
                                                              "advantages", "rewards")), 1),
                  torch.tensor([0]), torch.tensor([1.0], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64))
    model = LogitsAreWeights()
    cfg = LearnerConfig(correction="mask_token", mask_low=0.5, mask_high=1.5, micro_batch=1, advantage="grpo")
    train_shard(SgdEngine(model, lr=1.0), alone, cfg, ref_model=None, sampling=Sampling(1.0, 1.0, 1),
                pad_id=0, timers={})
    assert model.head.weight[:, 0].tolist() == [0.0, 0.0]


def test_without_a_correction_no_importance_metrics_are_logged():
    cfg = LearnerConfig(minibatches=2, micro_batch=1, advantage="grpo")
    sums = train_shard(SgdEngine(LogitsAreWeights(), lr=1.0), _shard(0.25), cfg, ref_model=None, sampling=Sampling(1.0, 1.0, 1), pad_id=0, timers={})
    assert set(step_stats(sums, cfg)) == {"clip_frac", "dual_clip_frac", "approx_kl", "ratio_mean", "entropy"}


@pytest.mark.parametrize("t, kind, expected", [
    (0, "constant", 0.25), (3, "constant", 1.0), (50, "constant", 1.0),   # warm-up 4: (t + 1) / 4
    (4, "linear", 1.0), (54, "linear", 0.1 + 0.9 * 0.5), (104, "linear", 0.1), (500, "linear", 0.1),
    (4, "cosine", 1.0), (54, "cosine", 0.1 + 0.9 * 0.5), (29, "cosine", 0.1 + 0.9 * (1 + math.cos(math.pi / 4)) / 2),
    (104, "cosine", 0.1),
])
def test_learning_rate_schedule_against_its_formula(t, kind, expected):
    # warm-up 4 optimizer steps, then decay over T - W = 100 steps to min_lr_ratio 0.1
    assert lr_factor(t, kind, warmup=4, total=104, min_ratio=0.1) == pytest.approx(expected)


def test_a_non_finite_step_never_reaches_the_optimizer():
    """NaN advantages make the loss NaN: the weights stay as they were and the skip is counted. A
    finite loss with an inf gradient (an overflow in backward) is refused the same way."""
    from jury.learner.update import step_if_finite

    shard = _shard(0.25, minibatches=1)
    shard.batch.advantages[:] = float("nan")
    model = LogitsAreWeights()
    sums = train_shard(SgdEngine(model, lr=1.0), shard, LearnerConfig(micro_batch=2, advantage="grpo"),
                       ref_model=None, sampling=Sampling(1.0, 1.0, 1), pad_id=0, timers={})
    assert model.head.weight[:, 0].tolist() == [0.0, 0.0] and sums["nonfinite_skips"] == 1
    engine = SgdEngine(LogitsAreWeights(), lr=1.0)
    engine.module.head.weight.grad = torch.tensor([[float("inf")], [1.0]])
    assert step_if_finite(engine, 0.5) == "gradient"
    assert engine.module.head.weight[:, 0].tolist() == [0.0, 0.0] and engine.module.head.weight.grad is None
    engine.module.head.weight.grad = torch.ones(2, 1)  # a finite step goes through the same call
    assert step_if_finite(engine, 0.5) is None and engine.module.head.weight[:, 0].tolist() == [-1.0, -1.0]


def test_steps_in_a_row_with_a_skip_stop_the_learner_naming_the_step():
    from types import SimpleNamespace

    from jury.learner.errors import TrainingStopped
    from jury.learner.learner import Learner

    learner = SimpleNamespace(counts={}, nonfinite_streak=0, cfg=LearnerConfig(max_nonfinite_steps=3), version=0)
    for version, skips in ((6, 1), (7, 0), (8, 1), (9, 1)):  # a finite step between resets the count
        learner.version = version
        assert Learner._nonfinite(learner, skips, "loss") == {"learner/nonfinite_skipped": float(skips)}
    learner.version = 10
    with pytest.raises(TrainingStopped, match=r"step 9: the loss was not finite in 3 steps in a row .* the weights "
                                              r"are those before step 7"):
        Learner._nonfinite(learner, 1, "loss")
    assert learner.counts["nonfinite_skips"] == 4


def test_a_no_grad_pass_groups_rows_of_similar_length_and_gives_each_row_its_own_log_probs(tiny_model_path):
    """recompute_old's proximal pass (update.forward_pass, like the critic's values) pads each
    micro-batch to its longest row: rows of alternating lengths, taken two at a time as they come,
    would pad every pass to the long one. By length, the short rows go together, every row once; and
    each row's log-probs are the ones it gets alone."""
    from transformers import AutoModelForCausalLM

    from jury.learner.grpo import token_logprobs
    from jury.learner.update import forward_pass, pass_rows

    lengths = [12, 3, 11, 4, 10, 5]  # prompt + completion, right-padded to 12
    n, width = len(lengths), max(lengths)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 200, (n, width), generator=gen)
    attention = (torch.arange(width) < torch.tensor(lengths)[:, None]).long()
    ids = ids * attention
    completion = attention[:, 1:].float() * (torch.arange(1, width) >= 2).float()  # a 2-token prompt
    b = Batch(ids, attention, completion, torch.zeros(n, width - 1), torch.zeros(n), torch.zeros(n), 3)
    chunks = pass_rows(b, 2)
    assert [c.tolist() for c in chunks] == [[1, 3], [5, 4], [2, 0]]  # lengths 3, 4 | 5, 10 | 11, 12
    assert sum(len(c) * max(lengths[i] for i in c.tolist()) for c in chunks) == 2 * (4 + 10 + 12) < 6 * 12
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32).eval()
    shard = Shard(b, minibatch=torch.zeros(n, dtype=torch.long), tokens=torch.ones(1, dtype=torch.float64),
                  seqs=torch.ones(1, dtype=torch.float64))
    logp, _ = forward_pass(model, shard, 2, Sampling(1.0, 1.0, 1), pad_id=0)
    for i, length in enumerate(lengths):
        with torch.no_grad():
            alone = token_logprobs(model, ids[i:i + 1, :length], attention[i:i + 1, :length],
                                   completion[i:i + 1, :length - 1])[0]
        assert torch.allclose(logp[i, :length - 1], alone[0], atol=1e-5), i
        assert not logp[i, length - 1:].any()  # past the row's end: nothing


def test_tokens_outside_the_learners_nucleus_are_counted_as_a_share():
    """Under top_p < 1 a sampled token outside the learner's nucleus (a policy that moved) is scored
    under the whole distribution (learner/nucleus.py); the learner logs their share of the tokens.
    Token 0 has p = 0.9, so the nucleus at top_p 0.5 holds it alone: row B's token 1 is outside."""
    model = LogitsAreWeights()
    with torch.no_grad():
        model.head.weight[:, 0] = torch.tensor([math.log(9.0), 0.0])
    cfg = LearnerConfig(minibatches=1)
    sums = train_shard(SgdEngine(model, lr=1e-3), _shard(0.5, 1), cfg, ref_model=None,
                       sampling=Sampling(1.0, 0.5, 1), pad_id=0, timers={})
    assert sums["nucleus_outside"] / sums["weight"] == pytest.approx(0.5)
    # with a reference model (KL), its own forward through the nucleus does not overwrite the count:
    # at top_p 0.7 the policy (0.9, 0.1) keeps token 0 alone, the reference (0.6, 0.4) keeps both
    with torch.no_grad():
        model.head.weight[:, 0] = torch.tensor([math.log(9.0), 0.0])
    ref = LogitsAreWeights()
    with torch.no_grad():
        ref.head.weight[:, 0] = torch.tensor([math.log(0.6), math.log(0.4)])
    sums = train_shard(SgdEngine(model, lr=1e-3), _shard(0.5, 1), LearnerConfig(minibatches=1, kl_coef=0.1),
                       ref_model=ref, sampling=Sampling(1.0, 0.7, 1), pad_id=0, timers={})
    assert sums["nucleus_outside"] / sums["weight"] == pytest.approx(0.5)
    sums = train_shard(SgdEngine(model, lr=1e-3), _shard(0.5, 1), cfg, ref_model=None,
                       sampling=Sampling(1.0, 1.0, 1), pad_id=0, timers={})
    assert sums["nucleus_outside"] == 0  # no nucleus: nothing is outside it
