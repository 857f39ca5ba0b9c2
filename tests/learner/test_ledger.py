"""A batch's bookkeeping: how many policy versions its trajectories span, worked by hand."""
import math

import numpy as np

from jury.learner.ledger import batch_result
from jury.protocol.messages import PromptTask, RolloutGroup, Sample, ScoredGroup


def _group(index, version_start, version_end, token_versions):
    """A scored group, one sample per entry of token_versions ([] = no per-token versions)."""
    task = PromptTask(task_id=f"t{index}", index=index, prompt="p", label="1", source="s")
    samples = [Sample(np.array([7] * max(1, len(v)), np.int32), np.zeros(max(1, len(v)), np.float32), "", "stop",
                      token_versions=np.array(v, np.int32)) for v in token_versions]
    group = RolloutGroup(task, np.array([1], np.int32), samples, version_start, version_end, "g", 0.0)
    return ScoredGroup(group, [], np.zeros(len(samples), np.float32), "gt", None, 0.0, None, 0, 0.0)


def test_version_span_of_each_trajectory_by_hand():
    groups = [
        _group(0, 3, 3, [[], []]),                # drain: one version, 1 each
        _group(1, 2, 3, [[]]),                    # a group across a sync, no per-token record: 3 - 2 + 1 = 2
        _group(2, 4, 6, [[4, 4, 5], [4, 4], [4, 6, 6]]),  # inflight: 2, 1, and 4..6 = 3 (sync_every 2)
    ]
    metrics = batch_result(groups, step=6, t_train=1.0, arrived={}).metrics
    # spans 1, 1, 2, 2, 1, 3
    assert metrics["learner/version_span_mean"] == 10 / 6
    assert metrics["learner/version_span_max"] == 3.0


def test_a_batch_without_samples_has_no_span():
    metrics = batch_result([_group(0, 1, 1, [])], step=1, t_train=1.0, arrived={}).metrics
    assert math.isnan(metrics["learner/version_span_mean"]) and math.isnan(metrics["learner/version_span_max"])


def test_a_refused_group_has_no_say_in_the_vote_metrics():
    """A group the engine refused (no samples) or the verifier could not score has vote_share 0 and
    no answers: it was no vote, so it leaves reward/vote_share and reward/distinct_answers alone."""
    voted = _group(0, 1, 1, [[], [], [], []])
    voted.vote_share, voted.num_distinct = 0.75, 2
    refused = _group(1, 1, 1, [])
    refused.group.error = "prompt too long"
    unscored = _group(2, 1, 1, [[], []])
    unscored.error = "verifier timed out"
    metrics = batch_result([voted, refused, unscored], step=1, t_train=1.0, arrived={}).metrics
    assert metrics["reward/vote_share"] == 0.75 and metrics["reward/distinct_answers"] == 2.0


def test_a_step_with_no_group_has_every_key():
    """A step dynamic sampling skipped (every group flat up to the refill cap) trains no group: its
    row has the keys of any other, with 0 tokens and nan where nothing is averaged (the driver divides
    rollout/tokens by the step's time)."""
    result = batch_result([], step=3, t_train=1.0, arrived={})
    full = batch_result([_group(0, 3, 3, [[]])], step=3, t_train=1.0, arrived={})
    assert set(result.metrics) == set(full.metrics)
    assert result.metrics["rollout/tokens"] == 0.0 and math.isnan(result.metrics["staleness/max"])
    assert math.isnan(result.metrics["reward/mean"]) and math.isnan(result.metrics["rollout/completion_len"])
    assert result.ledger == [] and result.metrics["rollout/groups"] == 0 == result.metrics["rollout/completions"]
    assert full.metrics["rollout/groups"] == 1 and full.metrics["rollout/completions"] == 1


def test_refused_and_unscored_groups_are_in_the_ledger_but_not_in_what_was_trained():
    """The ledger records every group of the step, each with its error; the staleness and rollout
    figures are the update's, which trains neither a refused group nor an unscored one."""
    used = _group(0, 3, 3, [[], []])                 # staleness 4 - 3 = 1, two one-token samples
    refused = _group(1, 0, 0, [])                    # staleness 4, no samples
    refused.group.error = "prompt too long"
    unscored = _group(2, 1, 1, [[], [], []])         # staleness 3, three samples nobody trains
    unscored.error = "verifier timed out"
    result = batch_result([used, refused, unscored], step=4, t_train=1.0, arrived={})
    assert [row.staleness for row in result.ledger] == [1, 4, 3]
    assert [row.error for row in result.ledger] == [None, "prompt too long", "verifier timed out"]
    assert result.staleness_hist == {"1": 1}
    m = result.metrics
    assert m["staleness/max"] == 1.0 and m["staleness/mean"] == 1.0
    assert m["rollout/groups"] == 1 and m["rollout/completions"] == 2 and m["rollout/tokens"] == 2.0
    assert m["learner/version_span_max"] == 1.0
