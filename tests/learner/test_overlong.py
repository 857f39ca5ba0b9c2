"""DAPO's overlong handling (learner.overlong_*), worked by hand: the soft length penalty against
the paper's formula and verl's code, its place before the advantages, the filter's loss mask, and
the settings' way through the run plan that `jury replay` rebuilds."""
import math

import numpy as np
import pytest
import torch

from jury.learner.grpo import Batch, collate, overlong_penalty, overlong_stats
from jury.learner.shard import Shard
from jury.learner.update import keep_loss_rows, train_shard
from jury.protocol.config import ConfigError, GeneratorConfig, LearnerConfig, RunConfig
from jury.protocol.config_load import dump_config, load_run_config
from jury.protocol.messages import PromptTask, RolloutGroup, Sample, ScoredGroup
from jury.protocol.plan import Overlong, Sampling, make_plan

from test_update import LogitsAreWeights, SgdEngine  # the stand-in decoder and engine of the update tests


def test_penalty_by_hand():
    # L_max = 20, L_cache = 8: free up to 12 tokens, then -1/8 per token, -1 at 20 and past it
    lengths = [0, 10, 12, 13, 16, 20, 21]
    got = overlong_penalty(np.array(lengths), Overlong(20, 8, 1.0, False))
    assert got.tolist() == [0.0, 0.0, 0.0, -0.125, -0.5, -1.0, -1.0]
    # overlong_penalty scales the whole line (verl's penalty_factor)
    half = overlong_penalty(np.array(lengths), Overlong(20, 8, 0.5, False))
    assert half.tolist() == [0.0, 0.0, 0.0, -0.0625, -0.25, -0.5, -0.5]
    # no buffer: no penalty, whatever the length (the filter alone may be on)
    assert overlong_penalty(np.array([20, 25]), Overlong(20, 0, 1.0, True)).tolist() == [0.0, 0.0]


def test_penalty_is_verls():
    """Restates volcengine/verl @ 0bd4ecb9302bdf8d482c8451ffd7ce3ff323653f,
    verl/workers/reward_manager/dapo.py, DAPORewardManager.__call__ (overlong_buffer_cfg.enable):
        expected_len = max_resp_len - overlong_buffer_len
        exceed_len = valid_response_length - expected_len
        overlong_reward = min(-exceed_len / overlong_buffer_len * overlong_penalty_factor, 0)
    over every length verl can see (a response is at most max_resp_len tokens there), and the
    paper's third case (|y| > L_max: -1, times the factor) past it."""
    max_resp_len, buffer_len, factor = 64, 16, 0.7

    def verl(length):
        expected_len = max_resp_len - buffer_len
        exceed_len = length - expected_len
        return min(-exceed_len / buffer_len * factor, 0)

    lengths = np.arange(0, max_resp_len + 1)
    ours = overlong_penalty(lengths, Overlong(max_resp_len, buffer_len, factor, False))
    np.testing.assert_allclose(ours, [verl(n) for n in lengths], rtol=0, atol=1e-12)
    assert overlong_penalty(np.array([max_resp_len + 5]), Overlong(max_resp_len, buffer_len, factor, False))[0] == \
        pytest.approx(-factor)


def _group(lengths, rewards, finish):
    task = PromptTask(task_id="t0", index=0, prompt="p", label="1", source="s")
    samples = [Sample(np.full(n, 5, np.int32), np.full(n, -1.0, np.float32), "", f)
               for n, f in zip(lengths, finish)]
    group = RolloutGroup(task, np.array([1, 2], np.int32), samples, 0, 0, "g", 0.0)
    return ScoredGroup(group, [], np.array(rewards, np.float32), "gt", None, 0.0, None, 0, 0.0)


def test_penalty_is_added_before_the_advantages():
    # L_max = 20, L_cache = 8; lengths 4, 13, 16, 20 -> penalties 0, -1/8, -1/2, -1
    # rewards 1, 1, 0, 0 -> shaped 1, 0.875, -0.5, -1; mean 0.375 / 4 = 0.09375
    # drgrpo (r - mean): 0.90625, 0.78125, -0.59375, -1.09375
    g = _group([4, 13, 16, 20], [1.0, 1.0, 0.0, 0.0], ["stop", "stop", "stop", "length"])
    b = collate([g], LearnerConfig(advantage="drgrpo"), pad_id=0, overlong=Overlong(20, 8, 1.0, False))
    torch.testing.assert_close(b.advantages, torch.tensor([0.90625, 0.78125, -0.59375, -1.09375]))
    assert b.rewards.tolist() == [1.0, 1.0, 0.0, 0.0]  # the scheme's rewards, as the ledger logs them
    assert b.penalty.tolist() == [0.0, -0.125, -0.5, -1.0]
    assert b.in_loss.tolist() == [1.0, 1.0, 1.0, 1.0]  # no filter
    assert overlong_stats(b) == {"overlong_penalised_frac": 0.75, "overlong_penalty_mean": -1.625 / 4,
                                 "overlong_filtered_frac": 0.0}
    # off: the same batch as before the setting existed
    plain = collate([g], LearnerConfig(advantage="drgrpo"), pad_id=0)
    torch.testing.assert_close(plain.advantages, torch.tensor([0.5, 0.5, -0.5, -0.5]))
    assert plain.penalty.tolist() == [0.0] * 4


def test_filter_masks_truncated_samples_but_they_count_in_the_group():
    # rewards 1, 0, 1, 0 with samples 2 and 4 truncated: the group's mean is still 0.5 over all four
    # (drgrpo: +-0.5), and the truncated two are out of the loss
    g = _group([3, 6, 2, 6], [1.0, 0.0, 1.0, 0.0], ["stop", "length", "stop", "length"])
    b = collate([g], LearnerConfig(advantage="drgrpo"), pad_id=0, overlong=Overlong(6, 0, 1.0, True))
    torch.testing.assert_close(b.advantages, torch.tensor([0.5, -0.5, 0.5, -0.5]))
    assert b.in_loss.tolist() == [1.0, 0.0, 1.0, 0.0]
    assert overlong_stats(b)["overlong_filtered_frac"] == 0.5
    assert overlong_stats(b)["overlong_penalised_frac"] == 0.0


def _shard(rows: list[int], in_loss: list[float]) -> Shard:
    """Rows sample token 0 (advantage +1), token 1 (advantage -1) and token 0 again (advantage -1)."""
    ids = torch.tensor([[0, 0], [0, 1], [0, 0]])[rows]
    adv = torch.tensor([1.0, -1.0, -1.0])[rows]
    n = len(rows)
    return Shard(Batch(ids, torch.ones_like(ids), torch.ones(n, 1), torch.full((n, 1), math.log(0.5)), adv,
                       torch.zeros(n), 1, torch.tensor(in_loss)),
                 minibatch=torch.zeros(n, dtype=torch.long), tokens=torch.tensor([float(n)], dtype=torch.float64),
                 seqs=torch.tensor([float(n)], dtype=torch.float64))


def test_keep_loss_rows_recounts_the_denominators():
    shard = _shard([0, 1, 2], [1.0, 0.0, 1.0])
    keep_loss_rows(shard)
    assert shard.batch.completion[:, 0].tolist() == [1.0, 0.0, 1.0]
    assert shard.tokens.tolist() == [2.0] and shard.seqs.tolist() == [2.0]


def _trained_weights(shard, cfg) -> list[float]:
    """The head's first column after one SGD step (lr 1) of train_shard on `shard` under `cfg`."""
    model = LogitsAreWeights()
    train_shard(SgdEngine(model, lr=1.0), shard, cfg, ref_model=None, sampling=Sampling(1.0, 1.0, 1),
                pad_id=0, timers={})
    return model.head.weight[:, 0].tolist()


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_filtered_rows_train_as_if_absent(agg):
    """A filtered row changes neither the loss's numerator nor its denominator: the update equals
    the one on the batch without it (here the first two rows: +1 on token 0, -1 on token 1)."""
    cfg = LearnerConfig(overlong_filter=True, loss_agg=agg)
    weights = lambda shard: _trained_weights(shard, cfg)  # noqa: E731

    filtered = weights(_shard([0, 1, 2], [1.0, 1.0, 0.0]))
    absent = weights(_shard([0, 1], [1.0, 1.0]))
    everything = weights(_shard([0, 1, 2], [1.0, 1.0, 1.0]))
    assert filtered == pytest.approx(absent, abs=1e-12)
    # by hand, at W = 0 (p = 1/2 each, ratio 1): d log p_k / dW = e_k - p, so each row's gradient is
    # -A (e_k - p) / rows. Two rows: A and B each give (-1/4, +1/4): W = (1/2, -1/2) after lr 1.
    # All three: (-1/6, 1/6) twice and the third's (+1/6, -1/6): W = (1/6, -1/6)
    assert absent == pytest.approx([0.5, -0.5], abs=1e-12)
    assert everything == pytest.approx([1 / 6, -1 / 6], abs=1e-6)  # float32 weights


def test_under_dr_grpo_a_filtered_row_still_counts_in_the_constant():
    """Dr. GRPO divides by a constant, G x the generation limit, whatever the mask: TRL's
    grpo_trainer (loss_type "dr_grpo") divides by per_token_loss.size(0) x max_completion_length,
    rows its mask_truncated_completions emptied included (huggingface/trl@f2cd5771). So the
    filtered batch's step is the two rows' sum over 3 x 1, 2/3 of the step without the third row
    (sum over 2 x 1); it was that step exactly (the recount took the row out of the constant)."""
    cfg = LearnerConfig(overlong_filter=True, loss_agg="dr_grpo")
    weights = lambda shard: _trained_weights(shard, cfg)  # noqa: E731

    filtered = weights(_shard([0, 1, 2], [1.0, 1.0, 0.0]))
    absent = weights(_shard([0, 1], [1.0, 1.0]))
    assert absent == pytest.approx([0.5, -0.5], abs=1e-12)
    assert filtered == pytest.approx([1 / 3, -1 / 3], abs=1e-6)


def test_plan_carries_the_settings_and_replay_rebuilds_them(tmp_path):
    gen = GeneratorConfig(max_new_tokens=48)
    cfg = RunConfig(generator=gen, learner=LearnerConfig(overlong_buffer=16, overlong_penalty=0.5,
                                                         overlong_filter=True))
    assert make_plan(cfg).overlong == Overlong(48, 16, 0.5, True)
    assert make_plan(RunConfig(generator=gen)).overlong is None  # off by default
    # `jury replay` loads the run folder's config.yaml and builds the plan from it
    (tmp_path / "config.yaml").write_text(dump_config(cfg))
    assert make_plan(load_run_config(str(tmp_path))).overlong == Overlong(48, 16, 0.5, True)


def test_a_buffer_past_the_generation_limit_is_refused():
    with pytest.raises(ConfigError, match="overlong_buffer"):
        RunConfig(generator=GeneratorConfig(max_new_tokens=32), learner=LearnerConfig(overlong_buffer=33))
    with pytest.raises(ConfigError, match="overlong_buffer"):
        LearnerConfig(overlong_buffer=-1)


def _rank_1(store_path, out_path):
    import torch.distributed as dist

    from jury.learner.shard import recv_shard

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=1, world_size=2)
    shard = recv_shard(torch.device("cpu"))
    torch.save({"in_loss": shard.batch.in_loss, "penalty": shard.batch.penalty,
                "scoring_penalty": shard.scoring.penalty}, out_path)
    dist.destroy_process_group()


def test_a_second_rank_receives_the_mask_and_the_penalty(tmp_path):
    """send_shards / recv_shard over gloo: rank 1 gets its rows' in_loss and penalty, and with a
    self-reward the whole batch's penalty (the advantages it computes itself need it)."""
    import torch.distributed as dist
    import torch.multiprocessing as mp

    from jury.learner.self_rewards import Scoring
    from jury.learner.shard import send_shards

    store, out = tmp_path / "store", tmp_path / "rank1.pt"
    ctx = mp.get_context("spawn")
    other = ctx.Process(target=_rank_1, args=(str(store), str(out)))
    other.start()
    try:
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=2)
        g = _group([2, 3, 5, 6], [1.0, 0.0, 1.0, 0.0], ["stop", "stop", "stop", "length"])
        b = collate([g], LearnerConfig(), pad_id=0, overlong=Overlong(6, 4, 1.0, True))
        n = len(b.rewards)
        scoring = Scoring(torch.ones(n, dtype=torch.bool), torch.zeros(n, dtype=torch.long),
                          torch.ones(n, dtype=torch.bool), b.completion.clone(), 0)
        plan = [[[0, 1], [2, 3]]]  # one mini-batch: rows 0, 1 on rank 0, rows 2, 3 on rank 1
        own = send_shards(b, plan, torch.device("cpu"), scoring)
        other.join(timeout=120)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        if other.is_alive():
            other.kill()
    got = torch.load(out)
    # penalties for 2, 3, 5, 6 tokens with L_max 6, L_cache 4: 0, -1/4, -3/4, -1
    assert own.batch.penalty.tolist() == [0.0, -0.25] and own.batch.in_loss.tolist() == [1.0, 1.0]
    assert got["penalty"].tolist() == [-0.75, -1.0] and got["in_loss"].tolist() == [1.0, 0.0]
    assert got["scoring_penalty"].tolist() == [0.0, -0.25, -0.75, -1.0]


def test_a_self_reward_gets_the_penalty_before_its_advantages():
    """The learner's self-rewards (scored in its forward, after collate) get the same penalty:
    scores 0.2, 0.6 for two rows of one group with penalties 0, -1/2 -> shaped 0.2, 0.1."""
    from jury.learner.self_rewards import Scoring, shaped_group_rewards

    scoring = Scoring(torch.ones(2, dtype=torch.bool), torch.zeros(2, dtype=torch.long),
                      torch.ones(2, dtype=torch.bool), torch.ones(2, 1))
    shaped = shaped_group_rewards(torch.tensor([0.2, 0.6]), torch.tensor([0.0, -0.5]), scoring)
    np.testing.assert_allclose(shaped[0], [0.2, 0.1], rtol=1e-6)


def test_a_row_without_completion_tokens_is_no_sequence_in_any_count():
    """A generation aborted before its first token has no completion token: the plan's counts
    (shard.totals) and a recount agree that it is no sequence, so the seq-mean and dr_grpo
    denominators do not depend on whether a recount ran (counting it shrank those losses by 5/6)."""
    from jury.learner.shard import plan_shards, totals
    from jury.learner.update import recount

    shard = _shard([0, 1, 2], [1.0, 1.0, 1.0])
    shard.batch.completion[1] = 0.0  # no completion token
    tokens, seqs = totals(shard.batch, plan_shards(shard.batch, 1, 1))
    assert tokens.tolist() == [2.0] and seqs.tolist() == [2.0]
    recount(shard)
    assert shard.tokens.tolist() == tokens.tolist() and shard.seqs.tolist() == seqs.tolist()
