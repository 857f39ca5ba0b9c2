"""The peers' published async-over-sync speedups against `jury simulate --hardware`'s prediction from
their published setups: the table of docs/simulate.md, "Against published speedups".

    python benchmarks/sim_published.py [--steps 12] [--json OUT]

Each peer is simulated twice from its own setup: the synchronous baseline it reports (colocated:
every GPU generates, then every GPU trains, max_staleness 0) and its asynchronous arm (its own
generator:trainer split, staleness bound and partial rollouts: sync_mode inflight). The prediction
is the ratio of the two step times. Setups (model, GPUs, batch, lengths, split, bound) are from the
sources named in PEERS; what they do not publish (the response-length distribution, the
network) is an assumption named here and in the doc. Two columns: from the datasheets alone, and
with one unknown fitted on the synchronous arm (the method of `--calibration` here: fit on one
arm, predict the other): the efficiencies where the peer publishes its synchronous breakdown
(verl), else the median response length that reproduces its synchronous step (AReaL). Where a
peer publishes both arms' update times (verl), a third column gives the asynchronous trainer the
speed a GPU it was measured at (Peer.async_gain): not a prediction, a check of the schedule alone.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
from dataclasses import dataclass

from jury.experiments.sim_costs import load_costs, with_overrides
from jury.experiments.sim_gpu import hardware_costs, load_hardware, load_model, with_kv_limit
from jury.experiments.simulate import simulate
from jury.protocol.config_load import load_config


@dataclass(frozen=True)
class Peer:
    source: str
    hardware: str
    model: str
    gpus: int
    generator_gpus: int          # the asynchronous arm's split
    max_staleness: int
    published_sync_s: float      # seconds per step, the synchronous baseline
    published_async_s: float
    config: tuple[str, ...]      # both arms
    sync_config: tuple[str, ...] = ()
    async_config: tuple[str, ...] = ()
    lengths: tuple[float, float] = (8000, 0.8)   # lognormal median, sigma: ASSUMED (not published)
    prompt_tokens: int = 300                     # ASSUMED
    # the synchronous arm's published breakdown, seconds per step: generation, training (0: none)
    sync_generate_s: float = 0.0
    sync_train_s: float = 0.0
    # the asynchronous arm's engines drop each running sequence's KV at a weight update and prefill
    # it again (costs.generation.rebuild_kv_after_sync): AReaL's interruptible generation
    rebuild_kv: bool = False
    tp: int = 1                  # GPUs an engine spans (generator.tensor_parallel_size): ASSUMED where > 1
    # the trainer's update (and reference forward) in each arm, seconds a step, where published: how
    # much faster a GPU trains in the asynchronous arm than in the colocated one (async_gain)
    sync_update_s: float = 0.0
    async_update_s: float = 0.0

    def async_gain(self) -> float:
        """How much faster a GPU of the asynchronous trainer did a step's update than one of the colocated
        arm: the colocated arm's GPU-seconds for it over the asynchronous trainer's (the same forward and
        backward work). 1 where not published."""
        if not (self.sync_update_s and self.async_update_s):
            return 1.0
        return self.sync_update_s * self.gpus / (self.async_update_s * (self.gpus - self.generator_gpus))


AREAL = ("batch_groups=512", "generator.group_size=16", "max_prompt_tokens=1024", "generator.max_new_tokens=31744",
         "max_model_len=32768", "learner.recompute_old=true", "learner.gradient_checkpointing=true",
         "learner.zero_stage=1", "learner.micro_batch=2", "learner.minibatches=4",
         "generator.max_num_seqs=1024", "generator.max_tasks_in_flight=64")
PROMPTS_PER_STEP = 512  # every peer's published step
PEERS = {
    # AReaL v0.3 blog (blog/AReaL_v0_3.md, inclusionAI/AReaL 4aef98d), Table 2: R1-Distill-Qwen-1.5B,
    # 16 nodes of 8 H800, 1000 PPO steps, synchronous 41.0 h, asynchronous 14.8 h (the 2.77x).
    # Batch 512 prompts x 16, 31K generation, 3/4 of the GPUs for SGLang, max_head_offpolicyness 4,
    # recomputed log-probs, interruptible generation: benchmark/verl_v0_3_0_post1_76084d3/ at 820ca49.
    "areal-1.5b": Peer("AReaL v0.3, Table 2", "h800", "DeepSeek-R1-Distill-Qwen-1.5B", 128, 96, 4,
                       41.0 * 3600 / 1000, 14.8 * 3600 / 1000, AREAL, rebuild_kv=True),
    # the same table: R1-Distill-Qwen-7B on 24 nodes, 57.7 h against 25.4 h (2.27x)
    "areal-7b": Peer("AReaL v0.3, Table 2", "h800", "DeepSeek-R1-Distill-Qwen-7B", 192, 144, 4,
                     57.7 * 3600 / 1000, 25.4 * 3600 / 1000, AREAL, rebuild_kv=True),
    # verl recipe/fully_async_policy README (volcengine/verl, 10/17/2025): Qwen2.5-Math-7B, 128 H20,
    # DAPO, 28K responses, n 16, 512 prompts a step; colocated sync 356.30 s a step (generation 177.85,
    # old log-probs 53.92, update 113.81) against fully async 64:64 at 150.63 s (2.35x over 400 steps,
    # 2.67x over the first 100): require_batches 4 x mini-batch 32 prompts a trainer step, a sync every
    # 4 (512 prompts), staleness_threshold 0.5 (1.5 syncs' prompts in flight: a window of 6 batches),
    # partial rollouts; no log-prob recompute in the async arm. FSDP2: ZeRO-3's traffic.
    "verl-7b": Peer("verl fully_async_policy README", "h20", "Qwen2.5-Math-7B", 128, 64, 5,
                    356.30, 150.63,
                    ("batch_groups=128", "sync_every=4", "generator.group_size=16", "max_prompt_tokens=1024",
                     "generator.max_new_tokens=28672", "max_model_len=29696", "learner.gradient_checkpointing=true",
                     "learner.zero_stage=3", "learner.micro_batch=8", "generator.max_num_seqs=1024",
                     "generator.max_tasks_in_flight=64"),
                    # the synchronous arm: one 512-prompt batch a step, pi_old recomputed
                    sync_config=("batch_groups=512", "sync_every=1", "learner.recompute_old=true"),
                    lengths=(1500, 0.9),
                    sync_generate_s=177.85, sync_train_s=53.92 + 113.81, sync_update_s=113.81, async_update_s=113.16),
}
# the same README at volcengine/verl 19997f9 (12/25/2025) adds the 7B on 32 and 64 H20 and a mixture
# of experts: the rows below, each with its colocated sync arm's breakdown
VERL_7B = PEERS["verl-7b"]
PEERS["verl-7b-32"] = dataclasses.replace(VERL_7B, gpus=32, generator_gpus=16, published_sync_s=790.10,
                                          published_async_s=294.77, sync_generate_s=357.41,
                                          sync_train_s=107.71 + 269.80, sync_update_s=269.80, async_update_s=313.81)
PEERS["verl-7b-64"] = dataclasses.replace(VERL_7B, gpus=64, generator_gpus=32, published_sync_s=365.28,
                                          published_async_s=189.26, sync_generate_s=150.72,
                                          sync_train_s=70.26 + 133.41, sync_update_s=133.41, async_update_s=156.98)
# Qwen3-30B-A3B-Base (128 experts, 8 a token), 128 H20, GRPO with a reference model, 8K responses,
# n 16, 512 prompts a step, vLLM + Megatron; colocated sync 497.89 s a step (generation 348.05, old
# log-probs 28.73, reference 20.86, update 86.27) against fully async 96:32 at 282.75 s (1.72x over
# 400 steps): trainer steps of one 128-prompt mini-batch, a sync every 4 (512/128), staleness_threshold
# 0.5, partial rollouts. ASSUMED: engines of 2 GPUs (61 GB of weights leave one H20 room for few
# sequences), Megatron's distributed optimizer as ZeRO-1's traffic (its expert-parallel all-to-all
# is not modelled), the lengths as the 7B rows'.
PEERS["verl-30b-a3b"] = Peer("verl fully_async_policy README (19997f9)", "h20", "Qwen3-30B-A3B-Base", 128, 96, 5,
                             497.89, 282.75,
                             ("batch_groups=128", "sync_every=4", "generator.group_size=16", "max_prompt_tokens=1024",
                              "generator.max_new_tokens=8192", "max_model_len=9216", "learner.kl_coef=0.001",
                              "learner.gradient_checkpointing=true", "learner.zero_stage=1", "learner.micro_batch=8",
                              "generator.max_num_seqs=1024", "generator.max_tasks_in_flight=64",
                              "generator.tensor_parallel_size=2"),
                             sync_config=("batch_groups=512", "sync_every=1", "learner.recompute_old=true"),
                             lengths=(1500, 0.9), sync_generate_s=348.05, sync_train_s=28.73 + 20.86 + 86.27, tp=2,
                             sync_update_s=20.86 + 86.27, async_update_s=50.05 + 206.63)


def arm(peer: Peer, steps: int, synchronous: bool, efficiency: list[str], train_gain: float = 1.0) -> dict:
    """One arm simulated; `train_gain` divides the learner's seconds a token (the dedicated trainer's
    measured speed a GPU over the colocated one's, which no efficiency below 1 can carry: the fitted
    train_mfu times it passes 1)."""
    # the peers' trainers run no reward-hacking monitor: none of its initial-KL forward is priced
    common = [*peer.config, f"model=/models/{peer.model}", f"steps={steps}", "num_verifiers=16",
              "generator.sync_mode=inflight", "monitor.enabled=false"]
    if synchronous:
        over = [*common, *peer.sync_config, f"num_generators={peer.gpus // peer.tp}",
                f"learner.num_ranks={peer.gpus}", "max_staleness=0"]
    else:
        # both peers' trainers take the first groups finished (a replay buffer, a stream), the bound
        # held at admission: continuous admission, a group over the bound trained and counted
        over = [*common, "admission=continuous", "over_budget=train", *peer.async_config,
                f"num_generators={peer.generator_gpus // peer.tp}",
                f"learner.num_ranks={peer.gpus - peer.generator_gpus}", f"max_staleness={peer.max_staleness}"]
    cfg = load_config(None, over)
    base = with_overrides(load_costs(None), [
        "generation.lengths.kind=lognormal", f"generation.lengths.median={peer.lengths[0]}",
        f"generation.lengths.sigma={peer.lengths[1]}", f"generation.prompt_tokens={peer.prompt_tokens}",
        f"generation.rebuild_kv_after_sync={str(peer.rebuild_kv).lower()}", "verifier.check_s=0.0001"])
    gpus, model = load_hardware(peer.hardware, overrides=efficiency), load_model(cfg.model)
    costs = hardware_costs(cfg, model, gpus, base)
    costs = dataclasses.replace(costs, learner=dataclasses.replace(
        costs.learner, token_s=costs.learner.token_s / train_gain))
    return simulate(with_kv_limit(cfg, model, gpus, base), costs)


def _median_for(peer: Peer, steps: int, target_s: float, key: str, efficiency: list[str]) -> Peer:
    """The peer with the median response length that makes its synchronous arm's `key` (seconds a
    step) `target_s`: bisection in log space."""
    low, high = math.log(100), math.log(peer.lengths[0] * 4)
    for _ in range(7):
        mid = (low + high) / 2
        trial = dataclasses.replace(peer, lengths=(round(math.exp(mid)), peer.lengths[1]))
        if arm(trial, steps, True, efficiency)[key] > target_s:
            high = mid
        else:
            low = mid
    return dataclasses.replace(peer, lengths=(round(math.exp((low + high) / 2)), peer.lengths[1]))


def _scale_to(peer: Peer, steps: int, eff: dict, rounds: int = 6, tolerance: float = 0.01) -> list[str]:
    """The efficiencies in `eff` scaled until the synchronous arm's generation and training times are
    the published ones within `tolerance` (decode_bandwidth capped at 0.95 and train_mfu at 1, where
    they stop), or `rounds` rounds have run: generation goes as 1/decode_bandwidth, training as
    1/train_mfu."""
    for _ in range(rounds):
        r = arm(peer, steps, True, [f"efficiency.{k}={v}" for k, v in eff.items()])
        off = {"decode_bandwidth": r["learner_wait_s"] / peer.sync_generate_s,
               "train_mfu": r["learner_train_s"] / peer.sync_train_s}
        cap = {"decode_bandwidth": 0.95, "train_mfu": 1.0}
        if all(abs(off[k] - 1) < tolerance or (v >= cap[k] and off[k] > 1)
               for k, v in eff.items()):
            break
        for k in eff:  # train_mfu stops at 1, the card's peak (sim_gpu.Efficiency refuses more)
            eff[k] = min(cap[k], eff[k] * off[k])
    return [f"efficiency.{k}={v:.4g}" for k, v in eff.items()]


def fitted(peer: Peer, steps: int, fit: str = "efficiency") -> tuple[Peer, list[str]]:
    """What the peer does not publish, fitted on its synchronous arm (as `--calibration` fits one arm
    and predicts the others). With a published breakdown, fit="efficiency": the efficiencies that
    make the arm's generation and training times the published ones (two rounds of scaling:
    generation is memory-bound, its time goes as 1/decode_bandwidth; training as 1/train_mfu);
    fit="lengths": the median length that makes the training time the published one at the card's
    train_mfu, then decode_bandwidth as above. With only the step time: the median length that makes
    the arm's step the published one (the datasheet efficiencies)."""
    if peer.sync_train_s and fit == "lengths":
        peer = _median_for(peer, steps, peer.sync_train_s, "learner_train_s", [])
        eff = {"decode_bandwidth": load_hardware(peer.hardware)["generator"].efficiency.decode_bandwidth}
        return peer, _scale_to(peer, steps, eff)
    if peer.sync_train_s:
        table = load_hardware(peer.hardware)["learner"].efficiency  # the starting point of the fit
        return peer, _scale_to(peer, steps, {"train_mfu": table.train_mfu, "decode_bandwidth": table.decode_bandwidth})
    return _median_for(peer, steps, peer.published_sync_s, "step_s", []), []


def predict(peer: Peer, steps: int, efficiency: list[str], async_gain: float = 1.0) -> dict:
    """Both arms' seconds per published step of PROMPTS_PER_STEP prompts (verl's async trainer step
    is a quarter of one) and their ratio; `async_gain` multiplies the asynchronous arm's training speed."""
    sync, asyn = arm(peer, steps, True, efficiency), arm(peer, steps, False, efficiency, async_gain)
    sync_s, async_s = PROMPTS_PER_STEP / sync["groups_per_s"], PROMPTS_PER_STEP / asyn["groups_per_s"]
    return {"sync_step_s": sync_s, "async_step_s": async_s,
            "speedup": sync_s / async_s, "sync_generate_s": sync["learner_wait_s"],
            "sync_train_s": sync["learner_train_s"], "async_staleness_mean": asyn["staleness_mean"],
            "async_idle_generator": asyn["idle/generator"], "async_idle_learner": asyn["idle/learner"],
            "efficiency": efficiency}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--json", default="")
    p.add_argument("--peers", default=",".join(PEERS), help="which of: " + ", ".join(PEERS))
    p.add_argument("--fit", choices=("efficiency", "lengths"), default="efficiency",
                   help="with a published breakdown, what the synchronous arm fits: the efficiencies "
                        "(train_mfu, decode_bandwidth) or the median length and decode_bandwidth")
    args = p.parse_args()
    unknown = [name for name in args.peers.split(",") if name not in PEERS]
    if unknown:
        p.error(f"--peers: unknown peer {unknown[0]!r} (known: {', '.join(PEERS)})")
    out = {}
    print("| peer | setup | published sync / async s a step | published speedup | predicted (datasheets) "
          "sync / async s, speedup | predicted (fitted to the sync arm) sync / async s, speedup "
          "| fitted, the async trainer at its published speed a GPU: async s, speedup | async mean staleness |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.peers.split(","):
        peer = PEERS[name]
        datasheet = predict(peer, args.steps, [])
        fit_peer, efficiency = fitted(peer, args.steps, args.fit)
        fit = predict(fit_peer, args.steps, efficiency)
        gain = peer.async_gain()
        given = predict(fit_peer, args.steps, efficiency, gain) if gain != 1.0 else None
        out[name] = {"peer": dataclasses.asdict(peer), "datasheet": datasheet, "fitted": fit,
                     "fitted_lengths": fit_peer.lengths, "async_gain": gain, "fitted_with_gain": given}
        what = ", ".join([*efficiency, *([f"median length {fit_peer.lengths[0]}"]
                                         if fit_peer.lengths != peer.lengths else [])])
        fit_cell = f"{fit['sync_step_s']:.0f} / {fit['async_step_s']:.0f}, {fit['speedup']:.2f}x ({what})"
        given_cell = f"{given['async_step_s']:.0f}, {given['speedup']:.2f}x (gain {gain:.2f})" if given else "-"
        print(f"| {name} | {peer.gpus} {peer.hardware}, {peer.generator_gpus}:{peer.gpus - peer.generator_gpus}, "
              f"k={peer.max_staleness} | {peer.published_sync_s:.0f} / {peer.published_async_s:.0f} | "
              f"{peer.published_sync_s / peer.published_async_s:.2f}x | {datasheet['sync_step_s']:.0f} / "
              f"{datasheet['async_step_s']:.0f}, {datasheet['speedup']:.2f}x | {fit_cell} | "
              f"{given_cell} | {fit['async_staleness_mean']:.2f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
