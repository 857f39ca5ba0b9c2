"""The running actors of one run: built by `start`, healed by `recover`, removed by `close`.

Wiring order (each step needs the endpoints the previous one returned):
  learner binds its scored-group queue → verifiers bind their rollout queues and
  connect to the learner → the feeder binds the task queue → generators connect to
  the feeder and to every verifier → the weight group forms (learner rank 0).

Faults: generators and verifiers are restartable Ray actors. A restarted actor
comes back unwired (its __init__ ran again); `recover` wires it in again (new
endpoints for the generators, a new weight group and a sync for a generator), and
the driver re-sends from the feeder's ledger the groups the learner is missing.
"""
from __future__ import annotations

import logging
import os
import signal
import time

from jury.protocol.config import ConfigError, Fault, RunConfig
from jury.protocol.plan import LLMRole, RunPlan, make_plan
from jury.protocol.reaper import end as end_processes
from jury.models.registry import model_folder, model_positions
from jury.cluster.diversify import Diversifier
from jury.cluster.rewrite import Rewriter
from jury.data.prompts import resolve_template
from jury.cluster.errors import RunFailed, SyncTimeout, ray_start_failed
from jury.cluster.learner_group import LearnerGroup, LearnerDied  # noqa: F401  (LearnerDied re-exported)
from jury.cluster.feeder import Feeder
from jury.cluster.metrics import stage
from jury.cluster.placement import (check_cpu_bind, check_cpu_engine_start, engine_cpu_binds, generator_placement,
                                    server_placement, server_tensor_parallel)
from jury.protocol.transport import CurveKeys

log = logging.getLogger(__name__)
RESEND_DRAIN_S = 1.0  # at recovery, the learner takes in its queue this long before saying what it lacks
# verifier.reward -> the LLM role its scheme asks on the verifier workers
SCHEME_ROLES: dict[str, LLMRole] = {"tinyv": "tinyv", "llm_judge": "judge", "llm_kd": "teacher"}


def end_failed_ray_node(driver_pid: int, grace_s: float = 3.0) -> int:
    """End what a Ray node that failed to start in process `driver_pid` left running; returns how
    many. Its session folder is named after that process (session_DATE_TIME_MICROS_PID) and every
    process of the node names the folder on its command line; the dashboard agent, slow to start,
    outlives the raylet that started it (Ray does not end it: its parent is gone)."""
    import re

    import psutil

    session = re.compile(rf"session_\d{{4}}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_{driver_pid}(/|$|\s)")
    left = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.pid != driver_pid and session.search(" ".join(proc.info["cmdline"] or [])):
            left.append(proc)
    return len(end_processes(left, grace_s))


class Pipeline:
    def __init__(self, cfg: RunConfig, model_path: str, *, plan: RunPlan | None = None,
                 learner_checkpoint: str | None = None, initial_version: int = 0):
        """`model_path`: the weights the policy starts from (plan.policy_model, or a checkpoint's).
        `plan`: the run plan the driver resolved (default: resolved here, models through the registry)."""
        self.cfg, self.model_path = cfg, model_path
        self.plan = plan or make_plan(cfg, resolve=model_folder, positions=model_positions)
        self.learner_checkpoint, self.version = learner_checkpoint, initial_version
        self.learner = None
        self.generators: list = []
        self.verifiers: list = []
        self.verifier_endpoints: list[str] = []
        self.feeder = None
        self.llm_servers: dict = {}  # model -> LLMServer actor (plan.servers: TinyV, Lean-gate roles, DeRL)
        self.derl = None  # cluster.diversify.Diversifier when derl.enabled
        self.rewriter = None  # cluster.rewrite.Rewriter: CoReward's rewrites from an LLM
        self.started_ray = False
        self.host = None
        self.curve = None
        self.env: dict = {}
        self.recoveries = 0
        self.resent_at_recovery = 0  # tasks re-sent when a restarted worker was wired back in
        self.hung: set[str] = set()  # workers that stopped answering without dying (close does not wait on them)
        self.weight_dtype: str | None = None  # the engines' weight dtype, once the weight group formed
        self.weight_store: tuple[str, int] | None = None  # (host, port) of the weight group's store, once formed

    # ── building ──
    def start(self):
        """Every actor created at once (their engines start side by side: DeepSpeed, vLLM), or, where
        roles may share a GPU (plan.engines_after_learner), the vLLM engines once the learner is
        ready; then wired in order. A line per stage says what was made and how long it took."""
        import ray
        from transformers import AutoTokenizer

        cfg = self.cfg
        engine_start = check_cpu_engine_start()
        with self.stage("Ray"):
            self._init_ray()
            if cfg.check_resources:
                check_resources(cfg, [n["Resources"] for n in ray.nodes() if n["Alive"]])
            if self.started_ray:  # one machine: this process's cores are the engines'
                check_cpu_bind(os.environ.get("VLLM_CPU_OMP_THREADS_BIND"), sorted(os.sched_getaffinity(0)),
                               cfg.generator.num_gpus == 0 and cfg.generator.tensor_parallel_size == 1)
        # a local run binds on loopback; on a cluster every actor binds on its own node's
        # address (host=None) and returns the endpoint, so nothing is hard-coded
        self.host = "127.0.0.1" if self.started_ray else None
        feeder_host = "127.0.0.1" if self.started_ray else ray.util.get_node_ip_address()
        self.env = {"TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1",
                    "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "WARNING"), **engine_start}
        multi_node = sum(1 for n in ray.nodes() if n["Alive"]) > 1
        self.curve = CurveKeys.generate() if cfg.curve is True or (cfg.curve == "auto" and multi_node) else None
        self.learner = LearnerGroup.create(cfg, self.plan, self.model_path, env=self.env, checkpoint=self.learner_checkpoint,
                                           initial_version=self.version)
        if not self.plan.engines_after_learner:  # every engine starts beside DeepSpeed
            self._make_engines()
        with self.stage(f"learner: {cfg.learner.num_ranks} DeepSpeed rank(s), ZeRO-{cfg.learner.zero_stage}"):
            learner_ep = self.learner.start(self.host, self.curve)
        if self.plan.engines_after_learner:  # roles share a GPU: vLLM profiles what the learner left
            self._make_engines()
        with self.stage(f"{cfg.num_verifiers} verifier worker(s)"):
            try:
                self.verifier_endpoints = ray.get([v.start.remote(self.host, learner_ep, self.curve)
                                                   for v in self.verifiers])
            except ConfigError as e:  # a verifier's preflight refused a setting (verifier.check_timeout_s)
                raise ConfigError(str(getattr(e, "cause", e))) from None
        self.learner_endpoint = learner_ep
        tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        if cfg.derl.enabled:  # the prompt mix and plan store, on this (the driver's) process
            self.derl = Diversifier(cfg.derl, self._llm_client("derl"), tokenizer=tokenizer,
                                    max_prompt_tokens=cfg.max_prompt_tokens)
        if cfg.verifier.reward == "coreward" and cfg.verifier.rewrites == "llm":  # also here, on the driver
            self.rewriter = Rewriter(cfg.verifier, self._llm_client("rewriter"))
        self.feeder = Feeder(cfg.dataset, cfg.seed, cfg.batch_groups, self.plan.window, feeder_host,
                             tokenizer=tokenizer, max_prompt_tokens=cfg.max_prompt_tokens, curve=self.curve,
                             forced=self.plan.forced, mixer=self.derl or self.rewriter, data=cfg.data,
                             ahead=self.rewriter.ahead if self.rewriter else None, slots=self.plan.slots)
        if self.derl:  # DeRL's prompts are measured as sent: through the feeder's chat template
            self.derl.wrap = self.feeder.prompts.wrap
        with self.stage(f"{cfg.num_generators} generator(s): vLLM engine"):
            ray.get([self._start_generator(g) for g in self.generators])
        with self.stage(f"weight group ({cfg.weight_backend})"):
            self._init_weight_plane()

    def _make_engines(self):
        """The generators and the verifiers (which start the LLM servers): the actors with vLLM engines."""
        self.generators = [self._make_generator(i) for i in range(self.cfg.num_generators)]
        self.verifiers = [self._make_verifier(i) for i in range(self.cfg.num_verifiers)]

    def stage(self, what: str):
        return stage(what, self.cfg.progress)

    def _init_ray(self):
        import ray

        if ray.is_initialized():
            return
        cfg = self.cfg
        address = os.environ.get("RAY_ADDRESS")
        need = (cfg.learner.num_ranks * cfg.learner.num_cpus + cfg.num_generators * cfg.generator.num_cpus
                + cfg.num_verifiers * cfg.verifier.num_cpus)
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=True,
                     **({} if address else {"num_cpus": max(os.cpu_count() or 1, int(need + 1))}))
        except Exception as e:
            if "timed out during startup" not in str(e):
                raise
            end_failed_ray_node(os.getpid())
            raise RunFailed(ray_start_failed(address, os.getloadavg()[0], os.cpu_count() or 1)) from e
        self.started_ray = not address
        stop_on_sigterm()

    def _make_verifier(self, i: int):
        import ray

        from jury.cluster.recipes import CheckerRecipe, SchemeRecipe
        from jury.verifiers.worker import VerifierWorker

        cfg = self.cfg
        role = SCHEME_ROLES.get(cfg.verifier.reward)  # the scheme's own LLM (TinyV, the judge, the teacher)
        llm = self._llm_client(role) if role else None
        scheme = SchemeRecipe(cfg.verifier, self._gate_factory(), llm, self._derl_scorer(i),
                              template=resolve_template(cfg.data.template).text)
        return ray.remote(VerifierWorker).options(
            num_cpus=cfg.verifier.num_cpus, resources=cfg.verifier.resources, max_restarts=cfg.max_restarts,
            runtime_env={"env_vars": self.env},
        ).remote(cfg.verifier, f"verifier{i}", checker=CheckerRecipe(cfg.verifier), scheme=scheme)

    def _derl_scorer(self, i: int):
        """Verifier i's DeRL reward; its coin (random control) is seeded derl.seed + 1 + i."""
        from jury.verifiers.derl.scorer import DerlScorer

        d = self.cfg.derl
        if not d.enabled:
            return None
        return DerlScorer(d, self._llm_client("derl") if d.reward == "judge" else None, d.seed + 1 + i)

    def _make_generator(self, i: int):
        import ray

        from jury.actors.generator import Generator

        cfg = self.cfg
        env = {**self.env, "VLLM_CPU_KVCACHE_SPACE": str(cfg.generator.kv_cache_gib)}
        if cfg.generator.num_gpus == 0 and cfg.num_generators > 1 and "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
            env["VLLM_CPU_OMP_THREADS_BIND"] = engine_cpu_binds(cfg.num_generators, sorted(os.sched_getaffinity(0)))[i]
        placement = generator_placement(cfg.generator, i)
        return ray.remote(Generator).options(
            **placement, max_restarts=cfg.max_restarts, runtime_env={"env_vars": env},
        ).remote(cfg.generator, self.model_path, f"generator{i}", cfg.seed + i, cfg.max_model_len, self.version)

    def _start_generator(self, g, closed: bool = False):
        return g.start.remote(self.feeder.endpoint, self.verifier_endpoints, self.curve, closed)

    def _llm_client(self, role: LLMRole):
        """A client of the LLM server of `role` (its plan.servers entry), starting the server on
        first use: one engine per model, sized for every role it serves; or of the OpenAI-compatible
        endpoint the plan names for its model (verifier.llm_endpoints), where nothing is started."""
        import ray

        from jury.actors.llm_server import LLMServer
        from jury.cluster.llm_client import OpenAIClient, RayLLMClient

        spec = self.plan.server_of(role)
        if spec.url:
            return OpenAIClient(spec.url, spec.model, api_key_env=self.cfg.verifier.llm_api_key_env)
        if spec.model not in self.llm_servers:
            self.llm_servers[spec.model] = ray.remote(LLMServer).options(
                **server_placement(spec, len(self.llm_servers)),
                runtime_env={"env_vars": {**self.env, "VLLM_CPU_KVCACHE_SPACE": "1"}},
            ).remote(spec.model, **server_args(spec, self.cfg.seed))
        return RayLLMClient(self.llm_servers[spec.model])

    def _gate_factory(self):
        from jury.cluster.recipes import GateFactory

        kind = self.cfg.verifier.gate
        if kind == "none":
            return None
        if kind == "arith":
            return GateFactory("arith")
        return GateFactory("lean", self.cfg.lean,
                           {role: self._llm_client(role) for role in ("formalizer", "checker", "prover")})

    # ── the weight plane ──
    def _init_weight_plane(self):
        """A fresh group: learner rank 0, every generator's engine workers after it. A group formed
        before is aborted on every member first: under NCCL a member still in the old group's
        broadcast (a peer died under it) would otherwise stall until NCCL's watchdog ends it."""

        tp, timeout = self.cfg.generator.tensor_parallel_size, self.cfg.sync_timeout_s
        if self.weight_dtype is not None:
            self._wait_all({"learner": self.learner.rank0.abort_weights.remote(),
                            **{f"generator{i}": g.abort_weight_group.remote() for i, g in enumerate(self.generators)}},
                           "aborting the old weight group")
        world = 1 + tp * len(self.generators)
        host, port = self.learner.call0("init_weight_sender", self.host, world, self.cfg.weight_backend, timeout,
                                        timeout=timeout)
        self.weight_store = (host, port)
        joins = {f"generator{i}": g.init_weight_group.remote(host, port, world, 1 + i * tp, self.cfg.weight_backend,
                                                             timeout) for i, g in enumerate(self.generators)}
        joined = self._wait_all({"learner": self.learner.rank0.connect_weights.remote(), **joins},
                                "forming the weight group")
        # what the engines hold their weights in: the learner sends in it (generator.dtype "auto"
        # is resolved by vLLM, so the engine is asked, not the config)
        self.weight_dtype = joined["generator0"][0]["dtype"]

    def _wait_all(self, refs: dict, what: str, on_fail=None) -> dict:
        """ray.get of every role's call, bounded by sync_timeout_s; a role that does not answer in
        time stops the run with its name. An actor that died raises RayActorError as soon as it is
        seen, not after the others' (bounded) waits on it: recovery can start at once. `on_fail()`
        is called at the first failure, before anything is raised (a sync aborts its group: the
        roles still waiting for the failed one return, and can be asked to form a new one)."""
        import ray

        names = {ref: name for name, ref in refs.items()}
        deadline = time.monotonic() + self.cfg.sync_timeout_s
        pending, out, failed = list(names), {}, None
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                self.hung.update(names[r] for r in pending)
                late = ", ".join(names[r] for r in pending)
                raise failed or SyncTimeout(
                    f"{what}: {late} did not answer in {self.cfg.sync_timeout_s:.0f}s (sync_timeout_s); a hung "
                    f"engine or a network path between the learner and the generators that is closed")
            name = names[ready[0]]
            try:
                out[name] = ray.get(ready[0])
                continue
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as e:
                error = e
            if on_fail is not None:
                on_fail()
                on_fail = None
            if isinstance(error, ray.exceptions.RayActorError):
                if name.startswith("learner"):  # the learner cannot be restarted: the run stops
                    raise LearnerDied(f"{name.replace('learner', 'learner rank ')} died during {what}; "
                                      f"every actor was stopped. Cause: {str(error).splitlines()[0][:300]}") from None
                raise error
            failed = failed or error  # maybe the echo of a peer that died: look at the others
        if failed is not None:
            raise failed
        return {name: out[name] for name in refs}

    def sync_weights(self) -> dict:
        """One control message per generator, one bucketed broadcast, then the version bump."""

        t0 = time.perf_counter()
        update = self.learner.weight_update(self.cfg.bucket_mb, self.weight_dtype, timeout=self.cfg.sync_timeout_s)
        calls = {f"generator{i}": g.update_weights.remote(update) for i, g in enumerate(self.generators)}
        calls.update({f"learner{r}": ref for r, ref in enumerate(self.learner.broadcast(update))})
        done = self._wait_all(calls, f"weight sync to version {update.version}",
                              on_fail=lambda: self._abort_sync(update.version))
        sent = done["learner0"]
        acks = [v for k, v in done.items() if k.startswith("generator")]
        self.version = update.version
        return {"sync/total_s": time.perf_counter() - t0, "sync/gather_s": sent["gather_s"],
                "sync/broadcast_s": sent["broadcast_s"], "sync/ready_s": sent["ready_s"], "sync/bytes": sent["bytes"],
                "sync/generator_pause_s": max(a["pause_s"] for a in acks),
                "sync/generator_load_s": max(a["load_s"] for a in acks)}

    def _abort_sync(self, version: int):
        """A member failed during the sync to `version`: set its abort key, so that the learner and
        the live generators stop waiting for the failed one now, not after sync_timeout_s. The
        plane is formed again by recovery (a new store: the key goes with the old one)."""
        from jury.learner.weight_sender import abort_sync

        try:
            abort_sync(*self.weight_store, version)
        except Exception as e:  # the store's host (learner rank 0) is gone: its own waits end with it
            log.warning("could not abort the weight sync to version %d: %s", version, e)

    # ── faults ──
    def recover(self) -> list[str]:
        """Wire in every generator or verifier that Ray restarted, then re-send every task the
        learner lacks (a dead worker's groups are lost with it: re-sent now, not one batch per
        resend_after_s); returns what was repaired."""
        import ray

        repaired = []
        for i, v in enumerate(self.verifiers):
            if not self._alive_and_started(v, f"verifier{i}"):
                ep = ray.get(v.start.remote(self.host, self.learner_endpoint, self.curve), timeout=300)
                self.verifier_endpoints[i] = ep
                ray.get([g.connect_rollouts.remote([ep]) for j, g in enumerate(self.generators)
                         if self._alive_and_started(g, f"generator{j}")])
                repaired.append(f"verifier{i}")
        restarted = [i for i, g in enumerate(self.generators) if not self._alive_and_started(g, f"generator{i}")]
        if restarted:
            # Ray rebuilt each with the run's starting weights: it takes no task until the sync below
            # gives it the learner's (the feeder may have queued tasks while it was down)
            ray.get([self._start_generator(self.generators[i], closed=True) for i in restarted], timeout=600)
            # a gloo/NCCL group cannot take a member back: every rank forms a new one, and
            # every generator then gets the learner's current weights
            self._init_weight_plane()
            self.sync_weights()
            repaired += [f"generator{i}" for i in restarted]
        self.recoveries += len(repaired)
        if repaired:
            resent = self._resend_lacking()
            log.warning("recovered %s; re-sent %d task(s) the learner lacked", ", ".join(repaired), resent)
        return repaired

    def _resend_lacking(self) -> int:
        """Every task sent and not yet trained that the learner does not hold, sent again with its id.
        Which generator held which task is not known (the feeder's queue deals them out): a task
        still on a live worker is sent twice, and the learner keeps whichever copy comes first
        (learner/duplicates); what the dead worker held is not waited for any longer."""
        sent = sorted(i for i in self.feeder.pending if i not in self.feeder.held)
        if not sent:
            return 0
        # a second of draining: groups already on the learner's queue are not re-sent
        lacking = self.learner.hold(sent, RESEND_DRAIN_S).missing
        n = self.feeder.resend(lacking)
        self.resent_at_recovery += n
        return n

    def sync_weights_or_recover(self) -> dict:
        """A sync; if a generator died under it, wire the restarted one in (which syncs) instead."""
        import ray

        try:
            return self.sync_weights()
        except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as e:
            log.warning("weight sync failed (%s); recovering", str(e).splitlines()[0][:200])
            t0 = time.perf_counter()
            repaired = self.recover()
            if not any(r.startswith("generator") for r in repaired):
                self._init_weight_plane()  # the group broke but nobody restarted: form it again
                self.sync_weights()
            return {"sync/total_s": time.perf_counter() - t0, "sync/recovered": 1.0}

    def inject(self, fault: Fault):
        """Fault injection: kill -9 a worker's process (kill), the vLLM engine core under a generator
        (kill_engine), or a verifier's check process (kill_pool); SIGSTOP a worker's process (freeze);
        slow a worker down; make its loop raise."""
        import psutil
        import ray

        if fault.role != "learner":
            # an earlier fault's worker may still be restarting (its batch came in without it): the
            # next fault hits the restarted one, wired back in, with its engine up
            self.recover()
        actors = {"generator": self.generators, "verifier": self.verifiers, "learner": self.learner.ranks}
        actor = actors[fault.role][fault.index]
        if fault.action == "freeze":  # alive to the OS and to Ray, answering nothing, for good
            pid = ray.get(actor.pid.remote())
            log.warning("fault injection: freeze %s (SIGSTOP pid %d)", fault.target, pid)
            os.kill(pid, signal.SIGSTOP)
        elif fault.action.startswith("kill"):
            pid = ray.get(actor.pid.remote())
            if fault.action != "kill":  # a process under the actor: the engine core, or a check process
                marker = {"kill_engine": "EngineCore", "kill_pool": "spawn_main"}[fault.action]
                children = psutil.Process(pid).children(recursive=True)
                pid = next(c.pid for c in children if marker in " ".join(c.cmdline()) + c.name())
            log.warning("fault injection: %s %s (kill -9 pid %d)", fault.action, fault.target, pid)
            os.kill(pid, signal.SIGKILL)
        else:
            ray.get(actor.fault.remote(fault.action, fault.seconds))

    def _alive_and_started(self, actor, name: str) -> bool:
        """Whether the actor is up and wired; waits while Ray restarts it. A dead one is fatal
        (RayActorError), and so is one that answers nothing for group_timeout_s: a frozen process
        is alive to Ray, which would never restart it."""
        import ray

        timeout_s = self.cfg.group_timeout_s
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return bool(ray.get(actor.is_started.remote(), timeout=min(60.0, timeout_s)))
            except (ray.exceptions.ActorUnavailableError, ray.exceptions.GetTimeoutError):
                if time.monotonic() > deadline:
                    self.hung.add(name)
                    raise RunFailed(f"{name} has not answered for {timeout_s:.0f}s (group_timeout_s): its process is "
                                    f"frozen or hung (Ray restarts a dead one), or its restart never finished; every "
                                    f"actor was stopped, its engine processes with it") from None
                time.sleep(2)  # restarting: ask again

    # ── reading and closing ──
    def role_stats(self) -> dict:
        import ray

        out: dict = {}
        for name, actors in (("generator", self.generators), ("verifier", self.verifiers)):
            for i, a in enumerate(actors):
                try:
                    s = ray.get(a.stats.remote(), timeout=30)
                except Exception:  # restarting; its numbers come back with it
                    continue
                out.update({f"{name}{i}/{k.removeprefix('verifier/')}": v for k, v in s.items()})
        out.update({"feeder/admitted": self.feeder.admitted, "feeder/dropped_stale": self.feeder.dropped, "feeder/refused_too_long": self.feeder.refused_too_long,
                    "feeder/rewrite_too_long": self.feeder.rewrite_too_long,
                    "feeder/resent": self.feeder.resent, "feeder/queue_depth": self.feeder.sender.depth(),
                    "pipeline/recoveries": self.recoveries, "pipeline/resent_at_recovery": self.resent_at_recovery})
        return out

    def close(self, graceful: bool = True):
        """Stop every actor (engines first, they own child processes), then Ray if we started it.
        Not graceful (Ctrl-C): kill at once, without waiting for actors still starting or busy;
        an engine's processes follow their actor (vLLM watches its parent)."""
        import ray

        if not ray.is_initialized():
            return
        actors = self.generators + self.verifiers + list(self.llm_servers.values()) + (self.learner.ranks if self.learner else [])
        if graceful:  # a hung worker cannot stop itself: it is killed below without a wait on it
            named = {**{f"generator{i}": g for i, g in enumerate(self.generators)},
                     **{f"verifier{i}": v for i, v in enumerate(self.verifiers)}}
            hung = [named[n] for n in self.hung if n in named]
            try:
                ray.get([a.stop.remote() for a in actors if not any(a is h for h in hung)], timeout=60)
            except Exception as e:  # a dead actor cannot stop itself; kill below
                log.warning("shutdown: an actor did not stop cleanly: %s", e)
        for a in actors:
            ray.kill(a, no_restart=True)
        if self.learner:
            self.learner.kill()  # and its placement group
        if self.feeder:
            self.feeder.close()
        if self.started_ray:
            ray.shutdown()


def stop_on_sigterm():
    """SIGTERM (what Slurm, Kubernetes and systemd send) stops a run as Ctrl-C does: every actor
    stopped, a `jury train:` line. Installed after ray.init, whose own handler (sys.exit in the
    middle of whatever ran) it replaces; only the main thread may install one."""
    import threading

    def handler(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)


def server_args(spec, seed: int) -> dict:
    """LLMServer's keyword arguments from its plan.servers spec: the length it is sized for, its share
    of its GPUs' memory, tensor parallel over its GPUs."""
    return {"max_model_len": spec.max_model_len, "seed": seed, "gpu_memory_utilization": spec.gpu_memory_utilization,
            "tensor_parallel_size": server_tensor_parallel(spec), "on_gpus": spec.num_gpus > 0}


def demands(cfg: RunConfig) -> list[tuple[str, str, dict[str, float]]]:
    """(actor, the config fields that set it, Ray resources it asks for) for every actor of the run."""
    def ask(num_cpus, num_gpus, resources):
        return {k: v for k, v in {"CPU": num_cpus, "GPU": num_gpus, **resources}.items() if v > 0}

    g = cfg.generator
    gen_gpus = g.tensor_parallel_size if g.tensor_parallel_size > 1 and g.num_gpus > 0 else g.num_gpus
    lc = cfg.learner
    # advantage=gae: the critic lives in each rank's actor, beside the policy, on the rank's devices
    learner = "learner rank {}" + (" (policy and critic)" if lc.advantage == "gae" else "")
    return ([(learner.format(r), "learner.num_cpus/num_gpus/resources", ask(lc.num_cpus, lc.num_gpus, lc.resources))
             for r in range(lc.num_ranks)]
            + [(f"generator{i}", "generator.num_cpus/num_gpus/resources", ask(g.num_cpus, gen_gpus, g.resources))
               for i in range(cfg.num_generators)]
            + [(f"verifier{i}", "verifier.num_cpus/resources", ask(cfg.verifier.num_cpus, 0, cfg.verifier.resources))
               for i in range(cfg.num_verifiers)]
            # one server per distinct model (the plan's, models as configured): GPUs only
            + [(f"the LLM server for {spec.model}", "verifier.llm_num_gpus", ask(0, spec.num_gpus, {}))
               for spec in make_plan(cfg).servers])


def check_resources(cfg: RunConfig, nodes: list[dict[str, float]]):
    """Before anything is placed: every actor must fit on one node, and all of them on the
    cluster. Otherwise Ray would wait forever for a node that cannot exist; the message says
    which role asks for what and what the nodes have (check_resources=false on a cluster that
    autoscales: its nodes are not there yet)."""
    def fmt(d):
        return ", ".join(f"{k}: {v:g}" for k, v in sorted(d.items())) or "nothing"

    have = "; ".join(f"node {i}: {fmt({k: v for k, v in n.items() if not k.startswith('node:') and 'memory' not in k})}"
                     for i, n in enumerate(nodes))
    total: dict[str, float] = {}
    for actor, fields, need in demands(cfg):
        if not any(all(n.get(k, 0) >= v for k, v in need.items()) for n in nodes):
            raise RunFailed(f"{actor} asks for {fmt(need)} ({fields}), and no node of "
                            f"the cluster has that ({have})")
        for k, v in need.items():
            total[k] = total.get(k, 0.0) + v
    cluster = {k: sum(n.get(k, 0) for n in nodes) for k in total}
    short = {k: v for k, v in total.items() if v > cluster[k] + 1e-9}
    if short:
        raise RunFailed(f"the run asks for {fmt(short)} in all, the cluster has {fmt({k: cluster[k] for k in short})} "
                        f"({have})")
