"""`jury train`: the whole program in one function.

    feeder ─PromptTask─► generators ─RolloutGroup─► verifiers ─ScoredGroup─► learner
                                ▲                                               │
                                └──────────── weights, version v+1 ─────────────┘

The driver owns the feeder and the clock: it admits tasks within the staleness
budget, asks the learner for step s, syncs weights every `sync_every` steps (the
version goes up only after every generator acknowledged) and writes metrics.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict
from pathlib import Path

import yaml

from jury.cluster.config import RunConfig
from jury.cluster.feeder import Feeder
from jury.cluster.metrics import MetricsLog

log = logging.getLogger(__name__)


def resolve_model(cfg: RunConfig) -> str:
    if cfg.model != "tiny":
        if not (Path(cfg.model) / "config.json").exists():
            raise FileNotFoundError(f"model: {cfg.model} is not a Hugging Face model folder (no config.json)")
        return cfg.model
    from jury.cluster.tiny_model import make_tiny_model

    return str(make_tiny_model(progress=cfg.progress))


def make_run_dir(cfg: RunConfig) -> Path:
    path = Path(cfg.run_dir or f"runs/{time.strftime('%Y%m%d-%H%M%S')}")
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.yaml").write_text(yaml.safe_dump(asdict(cfg), sort_keys=False))
    return path


def _gate(cfg: RunConfig):
    if cfg.verifier.gate == "arith":
        from jury.verifiers.arith_gate import arith_gate

        return arith_gate
    if cfg.verifier.gate == "none":
        return None
    raise NotImplementedError(f"verifier.gate={cfg.verifier.gate!r} needs the Lean gate wiring (issue 5)")


class Pipeline:
    """The running actors of one run. `start` builds them, `close` leaves no process behind."""

    def __init__(self, cfg: RunConfig, model_path: str):
        self.cfg, self.model_path = cfg, model_path
        self.learner = None
        self.generators: list = []
        self.verifiers: list = []
        self.feeder = None
        self.llm_server = None
        self.version = 0
        self.started_ray = False

    def start(self):
        import ray
        from transformers import AutoTokenizer

        from jury.actors.generator import Generator
        from jury.learner.learner import Learner
        from jury.verifiers.worker import VerifierWorker

        cfg = self.cfg
        if not ray.is_initialized():
            address = os.environ.get("RAY_ADDRESS")
            need = cfg.learner.num_cpus + cfg.num_generators * cfg.generator.num_cpus + cfg.num_verifiers * cfg.verifier.num_cpus
            ray.init(address=address, include_dashboard=False, log_to_driver=True,
                     **({} if address else {"num_cpus": max(os.cpu_count() or 1, int(need + 1))}))
            self.started_ray = not address
        # a local run binds on loopback; on a cluster every actor binds on its own node's
        # address (host=None) and returns the endpoint, so nothing is hard-coded
        host = "127.0.0.1" if self.started_ray else None
        feeder_host = "127.0.0.1" if self.started_ray else ray.util.get_node_ip_address()
        env = {"TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1",
               "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "WARNING")}
        cpu = cfg.learner.num_gpus == 0
        self.learner = ray.remote(Learner).options(
            num_cpus=cfg.learner.num_cpus, num_gpus=cfg.learner.num_gpus, name=None,
            runtime_env={"env_vars": {**env, **({"DS_ACCELERATOR": "cpu"} if cpu else {})}},
        ).remote(cfg.learner, self.model_path, cfg.batch_groups, max_new_tokens=cfg.generator.max_new_tokens,
                 temperature=cfg.generator.temperature, seed=cfg.seed, device="cpu" if cpu else "cuda")
        learner_ep = ray.get(self.learner.start.remote(host))
        gate = _gate(cfg)
        llm = self._tinyv_client(env) if cfg.verifier.reward == "tinyv" else None
        self.verifiers = [
            ray.remote(VerifierWorker).options(num_cpus=cfg.verifier.num_cpus, runtime_env={"env_vars": env})
            .remote(cfg.verifier, f"verifier{i}", gate, llm) for i in range(cfg.num_verifiers)]
        verifier_eps = ray.get([v.start.remote(host, learner_ep) for v in self.verifiers])
        tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.feeder = Feeder(cfg.dataset, cfg.seed, cfg.batch_groups, cfg.max_staleness, feeder_host,
                             tokenizer=tokenizer, max_prompt_tokens=cfg.max_prompt_tokens)
        gen_env = {**env, "VLLM_CPU_KVCACHE_SPACE": str(cfg.generator.kv_cache_gib)}
        self.generators = [
            ray.remote(Generator).options(num_cpus=cfg.generator.num_cpus, num_gpus=cfg.generator.num_gpus,
                                          runtime_env={"env_vars": gen_env})
            .remote(cfg.generator, self.model_path, f"generator{i}", cfg.seed + i, cfg.max_model_len)
            for i in range(cfg.num_generators)]
        ray.get([g.start.remote(self.feeder.endpoint, verifier_eps) for g in self.generators])
        self._init_weight_plane(host)

    def _tinyv_client(self, env: dict):
        """TinyV's model on its own vLLM engine; every verifier worker shares it."""
        import ray

        from jury.actors.llm_server import LLMServer
        from jury.cluster.llm_client import RayLLMClient

        v = self.cfg.verifier
        path = self.model_path if v.tinyv_model == "tiny" else v.tinyv_model
        self.llm_server = ray.remote(LLMServer).options(
            num_cpus=0, runtime_env={"env_vars": {**env, "VLLM_CPU_KVCACHE_SPACE": "1"}},
        ).remote(path, max_model_len=min(v.tinyv_max_model_len, self.cfg.max_model_len), seed=self.cfg.seed)
        return RayLLMClient(self.llm_server)

    def _init_weight_plane(self, host: str | None):
        import ray

        tp = self.cfg.generator.tensor_parallel_size
        world = 1 + tp * len(self.generators)
        host, port = ray.get(self.learner.init_weight_sender.remote(host, world, self.cfg.weight_backend))
        joins = [g.init_weight_group.remote(host, port, world, 1 + i * tp, self.cfg.weight_backend)
                 for i, g in enumerate(self.generators)]
        ray.get(self.learner.connect_weights.remote())
        ray.get(joins)

    def sync_weights(self) -> dict:
        """One control message per generator, one bucketed broadcast, then the version bump."""
        import ray

        t0 = time.perf_counter()
        update = ray.get(self.learner.weight_update.remote(self.cfg.bucket_mb))
        acks = [g.update_weights.remote(update) for g in self.generators]
        sent = ray.get(self.learner.broadcast.remote(update))
        acks = ray.get(acks)
        self.version = update.version
        return {"sync/total_s": time.perf_counter() - t0, "sync/gather_s": sent["gather_s"],
                "sync/broadcast_s": sent["broadcast_s"], "sync/bytes": sent["bytes"],
                "sync/generator_pause_s": max(a["pause_s"] for a in acks),
                "sync/generator_load_s": max(a["load_s"] for a in acks)}

    def role_stats(self) -> dict:
        import ray

        out: dict = {}
        for i, s in enumerate(ray.get([g.stats.remote() for g in self.generators])):
            out.update({f"generator{i}/{k}": v for k, v in s.items()})
        for i, s in enumerate(ray.get([v.stats.remote() for v in self.verifiers])):
            out.update({k.replace("verifier/", f"verifier{i}/", 1): v for k, v in s.items()})
        out["feeder/admitted"] = self.feeder.admitted
        out["feeder/refused_too_long"] = self.feeder.refused_too_long
        out["feeder/queue_depth"] = self.feeder.sender.depth()
        return out

    def close(self):
        """Stop every actor (engines first, they own child processes), then Ray if we started it."""
        import ray

        if not ray.is_initialized():
            return
        actors = self.generators + self.verifiers + [a for a in (self.learner, self.llm_server) if a]
        try:
            ray.get([a.stop.remote() for a in actors], timeout=60)
        except Exception as e:  # a dead actor cannot stop itself; kill below
            log.warning("shutdown: an actor did not stop cleanly: %s", e)
        for a in actors:
            ray.kill(a)
        if self.feeder:
            self.feeder.close()
        if self.started_ray:
            ray.shutdown()


class RunFailed(RuntimeError):
    """A run that cannot go on; its message says why, for a person to read."""


def train(cfg: RunConfig) -> dict:
    """Run `cfg.steps` learner steps; returns a summary (also written to the run folder)."""
    import ray

    run_dir = make_run_dir(cfg)
    model_path = resolve_model(cfg)
    t_start = time.time()
    pipe = Pipeline(cfg, model_path)
    metrics = None
    summary: dict = {"run_dir": str(run_dir)}
    try:
        pipe.start()
        summary["startup_s"] = time.time() - t_start
        metrics = MetricsLog(run_dir, cfg.steps, cfg.progress)
        pipe.feeder.admit(pipe.version, stop_at=cfg.steps * cfg.batch_groups)
        last = time.perf_counter()
        for step in range(cfg.steps):
            try:
                row = ray.get(pipe.learner.step.remote(step, cfg.group_timeout_s))
            except ray.exceptions.RayActorError as e:
                raise RunFailed(f"the learner died at step {step}; every actor was stopped. Cause: {e}") from None
            if (step + 1) % cfg.sync_every == 0 and step + 1 < cfg.steps:
                row.update(pipe.sync_weights())
            pipe.feeder.admit(pipe.version, stop_at=cfg.steps * cfg.batch_groups)
            now = time.perf_counter()
            row.update({"perf/step_s": now - last, "perf/tokens_per_s": row["rollout/tokens"] / (now - last),
                        "generator/version": pipe.version})
            row.update(pipe.role_stats())
            last = now
            metrics.log(step, row)
        summary.update(pipe.role_stats())
        summary["final_checkpoint"] = ray.get(pipe.learner.save.remote(str(run_dir.resolve() / "final")))
    finally:
        if metrics:
            metrics.close()
        pipe.close()
    summary["wall_s"] = time.time() - t_start
    summary.update(_learning_summary(run_dir))
    (run_dir / "summary.yaml").write_text(yaml.safe_dump(summary, sort_keys=False))
    return summary


def _learning_summary(run_dir: Path) -> dict:
    from jury.cluster.metrics import read_metrics

    rows = read_metrics(run_dir)
    if not rows:
        return {}
    k = max(1, len(rows) // 5)
    mean = lambda key, part: sum(r[key] for r in part) / len(part)  # noqa: E731
    return {"steps": len(rows),
            "reward_first_fifth": mean("reward/mean", rows[:k]), "reward_last_fifth": mean("reward/mean", rows[-k:]),
            "pass_rate_first_fifth": mean("reward/pass_rate", rows[:k]),
            "pass_rate_last_fifth": mean("reward/pass_rate", rows[-k:]),
            "max_staleness_seen": max(r["staleness/max"] for r in rows)}
