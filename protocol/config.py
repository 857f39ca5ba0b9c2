"""The run's config: one frozen dataclass per role, combined into `RunConfig`.

Loaded from YAML, then `key=value` overrides (dotted paths, values parsed as YAML).
Every key and value is checked at start; a bad one is refused with its field's name,
never half-applied. Imports only the standard library and PyYAML, so every role may
read its own section, and the Lean-gate and DeRL sections live here too: importing
the config loads no verifier.
"""
from __future__ import annotations

import json
import math
import shlex
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal



class ConfigError(ValueError):
    pass


def _require(obj, *rules: tuple[str, bool, str]):
    """(field, ok, what it must be): the first rule that fails is refused, naming its field and value.
    Every section checks itself this way; the loader prefixes the section's name (lean.pool_size)."""
    for name, ok, must in rules:
        if not ok:
            raise ConfigError(f"{name} must be {must}, got {getattr(obj, name)!r}")


def _at_least(obj, low: int, *names: str) -> list[tuple[str, bool, str]]:
    return [(name, getattr(obj, name) >= low, f">= {low}") for name in names]


def _one_of(obj, name: str) -> tuple[str, bool, str]:
    """A Literal field's value among its choices (YAML or a caller may hand in anything)."""
    choices = typing.get_args(typing.get_type_hints(type(obj))[name])
    return name, getattr(obj, name) in choices, f"one of {list(choices)}"


# ── the Lean proof gate (verifier.gate=lean; verifiers/lean/) ──
DEFAULT_HEADER = (
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\n"
    "open BigOperators Real Nat Topology Rat"
)


@dataclass(frozen=True)
class LeanReplConfig:
    """How to run Lean. The command runs wherever a user has Lean, Mathlib and the REPL."""

    command: str = "lake env repl"  # shell-quoted argv; absolute paths if `user` applies
    cwd: str = ""                   # a Mathlib project, for `lake env`; "" = the caller's
    header: str = DEFAULT_HEADER    # imported once per process
    pool_size: int = 4              # REPL processes; each holds Mathlib in memory (~6-10 GB)
    memory_limit_mb: int = 16384    # RLIMIT_AS per process, 0 = none; counts mmapped .oleans
    start_timeout_s: float = 600.0  # header import; Mathlib takes tens of seconds cold
    recycle_after: int = 500        # commands per process: the REPL keeps every env snapshot
    user: str = "nobody"            # a root caller runs Lean as this user; "" = stay root
    isolate_network: Literal["auto", "on", "off"] = "auto"  # on: require `unshare --net`

    def __post_init__(self) -> None:
        try:
            argv = shlex.split(self.command)
        except ValueError as e:
            raise ConfigError(f"command must be a shell-quoted command line, got {self.command!r}: {e}") from None
        _require(self, ("command", bool(argv), "a command line, not empty"),
                 *_at_least(self, 1, "pool_size", "recycle_after"),
                 ("memory_limit_mb", self.memory_limit_mb >= 0, ">= 0"),
                 ("start_timeout_s", self.start_timeout_s > 0, "> 0"),
                 _one_of(self, "isolate_network"))

    def identity(self) -> str:
        """What a verdict depends on besides the Lean text: the command and its toolchain."""
        toolchain = ""
        if self.cwd and (Path(self.cwd) / "lean-toolchain").is_file():
            toolchain = (Path(self.cwd) / "lean-toolchain").read_text().strip()
        return json.dumps(["repl", self.command, self.cwd, toolchain])


@dataclass(frozen=True)
class LeanGateConfig:
    """The gate's settings (§5.5.1). Model names are for the wiring that builds the clients."""

    formalizer_model: str = "Goedel-LM/Goedel-Formalizer-V2-32B"
    checker_model: str = "Qwen/QwQ-32B"
    prover_model: str = "Goedel-LM/Goedel-Prover-V2-32B"
    num_statements: int = 8          # k autoformalizer samples
    checker_samples: int = 1         # judgements per candidate; the largest Correct share wins
    max_attempts: int = 16           # prover pass@k (Prover@16, Table 5)
    attempts_per_round: int = 4      # prover samples per generate call; fewer wastes less after a proof
    formalizer_temperature: float = 0.7
    checker_temperature: float = 0.7
    prover_temperature: float = 0.7
    formalizer_max_tokens: int = 32768
    checker_max_tokens: int = 32768
    prover_max_tokens: int = 32768
    proof_timeout_s: float = 60.0    # per proof check, Lean wall clock
    elaborate_statements: bool = True  # skip candidates Lean cannot elaborate before proving
    result_cache_size: int = 100_000   # (problem, answer) pairs
    verdict_cache_size: int = 100_000  # (statement, proof) pairs
    kimina_url: str = ""             # a kimina-lean-server instead of the local REPL pool
    lean: LeanReplConfig = field(default_factory=LeanReplConfig)
    # Where Lean runs: the local REPL pool, a kimina server (kimina_url), or LeanDojo on a
    # traced repository (leandojo_*: its git URL or path, commit, and the file and line
    # whose environment, usually right after its imports, the proofs run in).
    backend: Literal["repl", "kimina", "leandojo"] = "repl"
    leandojo_repo: str = ""
    leandojo_commit: str = ""
    leandojo_file: str = ""
    leandojo_line: int = 0
    # The verifier's own #eval after each proof: a theorem, the reference's elaborated type
    # (Expr equality), one test_problem, and a kernel replay of the new declarations. Needs
    # `Lean` among the header's imports (Mathlib has it); False falls back to the other checks.
    kernel_checks: bool = True

    def __post_init__(self) -> None:
        _require(self, *_at_least(self, 1, "num_statements", "checker_samples", "max_attempts", "attempts_per_round",
                                  "formalizer_max_tokens", "checker_max_tokens", "prover_max_tokens",
                                  "result_cache_size", "verdict_cache_size"),
                 *_at_least(self, 0, "formalizer_temperature", "checker_temperature", "prover_temperature"),
                 ("proof_timeout_s", self.proof_timeout_s > 0, "> 0"),
                 _one_of(self, "backend"),
                 ("kimina_url", self.backend != "kimina" or bool(self.kimina_url), "set when backend=kimina"),
                 ("leandojo_repo", self.backend != "leandojo" or bool(
                     self.leandojo_repo and self.leandojo_file and self.leandojo_line > 0),
                  "set, with leandojo_file and leandojo_line > 0, when backend=leandojo"))


# ── DeRL (derl.enabled; verifiers/derl/, cluster/diversify.py) ──
# §3.1 / §3.2.2, the list the model is shown, verbatim and in the paper's order.
FORBIDDEN_TACTICS = ("linarith", "simp_all", "simp", "omega", "ring", "aesop", "positivity", "trivial")


@dataclass(frozen=True)
class DerlConfig:
    """DeRL settings; the root config embeds one."""

    ratio: tuple[int, int] = (4, 1)  # original : diversifying prompts; §5.1/Table 1: 4:1 beats 2:1
    store_size: int = 60_000  # problems whose first correct CoT is kept (the paper trains on 60k)
    seed: int = 0  # which slots of each ratio block diversify
    plan_attempts: int = 2  # plans sampled per CoT; the first that does not leak is used
    plan_temperature: float = 0.6
    plan_max_tokens: int = 1024
    judge_temperature: float = 0.0  # one greedy verdict per sample, as a fixed external judge
    judge_max_tokens: int = 1024
    # Judge incorrect samples too: their reward is 0 either way, but Fig. 3's "judged
    # dissimilar" share counts them. False saves those calls.
    judge_all: bool = True
    # Numbers quoted from the problem statement may appear in a plan: the paper's own plans
    # do ("pairs of numbers that multiply to give 50", App. 8.1; "(a^2 - b^2)^2", App. 8.3).
    allow_problem_numbers: bool = True
    forbidden_tactics: tuple[str, ...] = FORBIDDEN_TACTICS
    # ── in a training run (cluster/diversify.py on the driver, verifiers/derl/scorer.py on the workers) ──
    enabled: bool = False  # `jury train derl.enabled=true`: mix diversifying prompts into training
    model: str = "tiny"  # the planner's and the judge's LLM: a HF folder, or "tiny" for the local tiny model
    # the reward on diversifying prompts: the paper's judge (1 iff correct and judged dissimilar), or
    # §3.3's control, a fair coin on diversifying prompts only (Table 1 "Partial Random Reward") or on
    # every prompt ("Random Reward (on all prompts)")
    reward: Literal["judge", "random_partial", "random_all"] = "judge"
    # original prompts in §3.1's format ("paper"), or as the dataset gives them ("dataset": a model
    # trained on that format, like the tiny one, keeps its pass rate and so has correct CoTs to plan from)
    original_prompt: Literal["paper", "dataset"] = "dataset"
    plans_per_step: int = 64  # stored CoTs sent to the planner at once; one request in flight at a time

    def __post_init__(self) -> None:
        # YAML hands in lists; keep the config hashable and immutable.
        object.__setattr__(self, "ratio", tuple(self.ratio))
        object.__setattr__(self, "forbidden_tactics", tuple(self.forbidden_tactics))
        _require(self, ("ratio", len(self.ratio) == 2 and min(self.ratio) >= 0 and sum(self.ratio) > 0,
                         "two non-negative ints, not both 0"),
                 _one_of(self, "reward"), _one_of(self, "original_prompt"),
                 *_at_least(self, 1, "store_size", "plan_attempts", "plan_max_tokens", "judge_max_tokens",
                            "plans_per_step"),
                 *_at_least(self, 0, "plan_temperature", "judge_temperature"),
                 ("forbidden_tactics", bool(self.forbidden_tactics), "a list of at least one tactic"))


# ── the dataset and the prompt (data/files.py, data/prompts.py) ──
@dataclass(frozen=True)
class DataConfig:
    """How the top-level `dataset` is read and what prompt each problem becomes.

    The dataset (and eval_path) is checked row by row before anything starts; a bad row
    is one the run cannot train on as written (data/files.py says which).
    """

    # jsonl, parquet (a file, or a folder of *.parquet shards) or hf (a `datasets` save_to_disk
    # folder); auto: by the extension (.jsonl, .parquet), a folder by what it holds
    format: Literal["auto", "jsonl", "parquet", "hf"] = "auto"
    split: str = "train"            # the split of a saved DatasetDict
    problem_key: str = "problem"    # the field with the problem text
    answer_key: str = "answer"      # the field with the label: text or an integer
    id_key: str = ""                # optional field naming each problem (ledger source: path#id); "" = none
    # CoReward (verifier.reward=coreward, verifier.rewrites=data): the field holding each problem
    # rewritten, the second prompt of its task (Co-rewarding-I's rewritten parquet); "" = none
    rewrite_key: str = ""
    eval_path: str = ""             # a separate evaluation set, same format and keys; checked at start, `jury eval` reads it
    epochs: int = 0                 # passes over the data, each reshuffled; 0 = no end. N > 0 caps `steps` at N passes
    shuffle: bool = True            # reshuffle every epoch, seeded by the run's seed and the epoch
    # rows held for shuffling: a dataset this small is shuffled exactly, a larger one within
    # this window (and its Parquet shards in a new order each epoch); memory grows with it
    shuffle_buffer: int = 100_000
    bad_rows: Literal["refuse", "skip"] = "refuse"  # skip: train without them, counted in data/bad_rows_skipped
    # a named template (bare, boxed, jury-rl, derl, derl-lean: data/prompts.py) or a UTF-8 file
    # whose text has {problem} where the problem goes; bare is today's "problem + newline"
    template: str = "bare"
    system_prompt: str = ""         # the chat's system message; needs a chat template
    # auto: through the tokenizer's chat template when it has one (model tiny has none, tiny-chat
    # has one); true (YAML's on): always, refusing a tokenizer without one; false (off): never
    chat_template: Literal["auto", True, False] = "auto"

    def __post_init__(self) -> None:
        keys = [k for k in (self.problem_key, self.answer_key, self.id_key, self.rewrite_key) if k]
        _require(self, _one_of(self, "format"), _one_of(self, "bad_rows"),
                 ("chat_template", self.chat_template == "auto" or type(self.chat_template) is bool,
                  "auto, true (on) or false (off)"),
                 *((name, bool(getattr(self, name)), "not empty") for name in ("split", "problem_key", "answer_key",
                                                                                "template")),
                 ("epochs", self.epochs >= 0, ">= 0"), ("shuffle_buffer", self.shuffle_buffer >= 1, ">= 1"))
        # rules between fields, named by the fields they tie together
        if self.system_prompt and self.chat_template is False:
            raise ConfigError("system_prompt needs a chat template, but chat_template is off")
        if len(set(keys)) != len(keys):
            raise ConfigError(f"problem_key, answer_key, id_key and rewrite_key must differ, got {keys}")


@dataclass(frozen=True)
class GeneratorConfig:
    group_size: int = 8            # G samples per task
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 16
    # for benchmarks that need completions of a set length. Not for training: vLLM masks the stop tokens
    # before its processed log-probs, over the first min_new_tokens tokens, and the learner scores the
    # whole softmax, so each of those tokens' ratio is off by 1 / (1 - p_stop) even at staleness 0
    min_new_tokens: int = 0
    # what a weight sync does to groups being generated: wait for them (drain), abort and
    # regenerate them with the new weights (interrupt), or swap under them (inflight: a
    # group's tokens may then come from two versions; version_start and version_end say which)
    sync_mode: Literal["drain", "interrupt", "inflight"] = "drain"
    dtype: str = "float32"
    enforce_eager: bool = True     # skip compilation: engine start matters more than peak speed here
    max_num_seqs: int = 256
    max_tasks_in_flight: int = 64  # tasks handed to the engine at once
    tensor_parallel_size: int = 1  # > 1 with num_gpus > 0: its GPUs reserved in one placement group
    kv_cache_gib: int = 1          # VLLM_CPU_KVCACHE_SPACE on the CPU
    gpu_memory_utilization: float = 0.9  # on GPUs: vLLM's share of the GPU (weights, activations, KV cache)
    num_cpus: float = 1.0          # Ray resources per generator actor
    num_gpus: float = 0.0
    resources: dict[str, float] = field(default_factory=dict)  # custom Ray resources, e.g. {generator: 1}

    def __post_init__(self):
        # >= 2 unless learner.advantage=gae (RunConfig: a group of one has group advantage 0)
        _require(self, ("group_size", self.group_size >= 1, ">= 1"),
                 # the learner divides its logits by the temperature to score what was sampled;
                 # greedy decoding is for evaluation (`jury eval --temperature 0`, eval.temperature)
                 ("temperature", self.temperature > 0, "> 0 (training samples from the policy; greedy is for eval)"),
                 # below 1 vLLM's log-probs are renormalised over the nucleus; the learner scores
                 # its tokens under the same nucleus (learner/nucleus.py, an unfused path)
                 ("top_p", 0 < self.top_p <= 1, "in (0, 1]"),
                 ("max_new_tokens", self.max_new_tokens >= 1, ">= 1"),
                 ("min_new_tokens", 0 <= self.min_new_tokens <= self.max_new_tokens, "in [0, max_new_tokens]"),
                 ("dtype", self.dtype in ("auto", "float32", "bfloat16", "float16"),
                  "one of auto, float32, bfloat16, float16"),
                 ("max_num_seqs", self.max_num_seqs >= 1, ">= 1"),
                 ("max_tasks_in_flight", self.max_tasks_in_flight >= 1, ">= 1"),
                 ("tensor_parallel_size", self.tensor_parallel_size >= 1, ">= 1"),
                 ("kv_cache_gib", self.kv_cache_gib >= 1, ">= 1"),
                 ("gpu_memory_utilization", 0 < self.gpu_memory_utilization <= 1, "in (0, 1]"),
                 ("num_cpus", self.num_cpus >= 0, ">= 0"), ("num_gpus", self.num_gpus >= 0, ">= 0"),
                 _within_gpu_share(self, "gpu_memory_utilization", "num_gpus"))


def _within_gpu_share(obj, memory: str, gpus: str) -> tuple[str, bool, str]:
    """vLLM's gpu_memory_utilization is a share of the whole GPU's memory, whatever fraction of the
    GPU Ray gave the actor: with half a GPU and 0.9, vLLM takes the memory of the role beside it."""
    share = getattr(obj, gpus)
    return memory, not 0 < share < 1 or getattr(obj, memory) <= share, (
        f"<= {gpus} ({share:g}) when the role has a fraction of a GPU: vLLM takes that share of the whole "
        "GPU's memory, and the roles beside it need the rest")


# What a response that neither boxes its answer nor states it ("the answer is", "Final
# Answer:") answers: no_answer (nothing: verdict no_answer), or last_expression (the last
# mathematical expression of its final sentence, as math-verify reads such responses).
# no_answer is the default because last_expression also pays responses that end on a value
# without committing to it (measured in docs/results.md, Math verifier)
Unanchored = Literal["no_answer", "last_expression"]


@dataclass(frozen=True)
class VerifierConfig:
    reward: Literal["ground_truth", "majority_vote", "jury", "self_certainty", "entropy", "tinyv",
                    "llm_judge", "llm_kd", "coreward"] = "jury"
    fallback: Literal["reszero", "zero", "mv"] = "reszero"  # JURY-RL when the proof gate is inconclusive
    reszero_c: float = 0.01
    # ResZero's rule for a sample without a parsable answer (verifiers/rewards.py, README "Reward
    # schemes"). cap: at most the lowest reward of a parsed sample in its group, the group then
    # re-centred (sum 0 kept): not answering never pays more than any answer. residual: the paper's
    # formula read literally (it is silent on the case): such a sample sits in the residual set
    # with z = 0 and can out-earn the majority (+0.58 against -1.73 under the GRPO advantage, issue 25)
    unparsable: Literal["cap", "residual"] = "cap"
    gate: Literal["arith", "lean", "none"] = "arith"
    pool_workers: int = 1          # processes for checks
    check_timeout_s: float = 5.0   # hard per-sample limit: past it the verdict is "timeout"
    accept_rounded: bool = False   # accept 0.333 for 1/3 (a decimal answer that only rounds to the value); counted apart
    unanchored: Unanchored = "no_answer"  # a response without a box or an answer statement (see Unanchored)
    resources: dict[str, float] = field(default_factory=dict)  # custom Ray resources, e.g. {verifier: 1}
    cache_size: int = 100_000
    tinyv_model: str = "tiny"      # TinyV's LLM (reward=tinyv): a HF folder, or a local model's name (tiny)
    tinyv_max_tokens: int = 8      # TinyV answers one word (True / False)
    # a response the rules found no answer in: TinyV is asked about its final statement, as TinyV's
    # own pipeline asks (ask), or it stays wrong without a call (zero)
    tinyv_unanswered: Literal["ask", "zero"] = "ask"
    # self_certainty and entropy are scored by the learner over the full distribution: the mean
    # over the whole response (Intuitor's and RENT's code) or over the final answer's tokens (how
    # JURY-RL's text describes its baselines, §5.3)
    self_reward_span: Literal["response", "answer"] = "response"
    # ── the label-free baselines of JURY-RL's Table 1 (§5.3; README, Reward schemes). Models: a HF
    # folder, a local model's name (tiny), or a name in llm_endpoints ──
    # LLM-as-a-Judge (reward=llm_judge): the paper's judge is qwen-2.5-72b-instruct, prompted with its
    # Appendix D prompt about each rollout's (question, final answer); 1 if it ends with True
    judge_model: str = "tiny"
    judge_max_tokens: int = 1024   # the prompt asks for reasoning before the verdict
    judge_temperature: float = 0.0  # the paper gives none; greedy, so a cached verdict is the judge's verdict
    # LLM-KD (reward=llm_kd): a teacher (the paper's: qwen-2.5-72b-instruct) answers each problem once;
    # its answer is the pseudo-label the samples are checked against with the run's label checker
    teacher_model: str = "tiny"
    teacher_max_tokens: int = 3072  # JURY-RL's response length (Table 6)
    teacher_temperature: float = 0.0  # the paper gives none: greedy, one reference answer
    llm_cache_size: int = 100_000  # the judge's (question, answer) verdicts; the teacher's answers, per problem
    # CoReward (reward=coreward): Co-rewarding-I (Zhang et al. 2025), each problem sampled G times as
    # written and G times rewritten, each view labelled by the other's majority. The rewrites come from
    # the dataset (data: the column data.rewrite_key, as Co-rewarding-I's rewritten parquet files) or
    # from rewrite_model, asked on the driver ahead of admission, in the background (llm: a task whose
    # rewrite is not ready when it is admitted goes without one, and its group earns 0, counted)
    rewrites: Literal["data", "llm"] = "data"
    rewrite_model: str = "tiny"    # Co-rewarding-I's rewriter is Qwen3-32B (rewrite_questions.py)
    rewrite_max_tokens: int = 2048  # theirs is 20480; a rewrite is one problem statement
    rewrite_temperature: float = 0.7  # theirs (with top_p 0.8, which the LLM clients here do not take)
    rewrite_ahead: int = 256       # problems drawn ahead of admission and sent to the rewriter
    rewrite_batch: int = 64        # problems per rewriter request; one request in flight at a time
    # model -> an OpenAI-compatible endpoint serving it, asked over HTTP instead of starting a vLLM engine
    # here: the full URL of its chat (".../v1/chat/completions": the server applies the chat template)
    # or completions (".../v1/completions": the prompt as is) route, e.g.
    # {Qwen/Qwen2.5-72B-Instruct: http://judge:8000/v1/chat/completions}; the request names the model as
    # written here. The key, if the endpoint wants one, is read from the variable llm_api_key_env names
    llm_endpoints: dict[str, str] = field(default_factory=dict)
    llm_api_key_env: str = "OPENAI_API_KEY"
    # Every LLM server (TinyV, the Lean gate's three roles, DeRL's planner and judge; one per
    # distinct model) takes max_model_len = llm_prompt_tokens + the largest max tokens of the roles
    # it serves, capped at the model's positions (with a warning). The run plan (protocol/plan.py)
    # sizes them; llm_num_gpus and llm_gpu_memory_utilization are each server's share of GPUs.
    llm_prompt_tokens: int = 4096
    llm_num_gpus: float = 0.0
    llm_gpu_memory_utilization: float = 0.9
    num_cpus: float = 0.5

    def __post_init__(self):
        _require(self, ("reszero_c", self.reszero_c >= 0, ">= 0"), _one_of(self, "unparsable"),
                 ("pool_workers", self.pool_workers >= 1, ">= 1 (checks run in these processes)"),
                 ("check_timeout_s", self.check_timeout_s > 0, "> 0"),
                 ("unanchored", self.unanchored in typing.get_args(Unanchored), f"one of {typing.get_args(Unanchored)}"),
                 ("cache_size", self.cache_size >= 0, ">= 0"),
                 ("tinyv_max_tokens", self.tinyv_max_tokens >= 1, ">= 1"), _one_of(self, "tinyv_unanswered"),
                 *_at_least(self, 1, "judge_max_tokens", "teacher_max_tokens", "llm_cache_size",
                            "rewrite_max_tokens", "rewrite_ahead", "rewrite_batch"),
                 *((name, getattr(self, name) >= 0, ">= 0") for name in ("judge_temperature", "teacher_temperature",
                                                                           "rewrite_temperature")),
                 _one_of(self, "rewrites"),
                 ("llm_endpoints", all(isinstance(u, str) and u.startswith(("http://", "https://"))
                                       and u.rstrip("/").endswith("/completions") for u in self.llm_endpoints.values()),
                  "model -> an http(s) URL ending in /chat/completions or /completions"),
                 ("llm_prompt_tokens", self.llm_prompt_tokens >= 1, ">= 1"),
                 ("llm_num_gpus", self.llm_num_gpus >= 0, ">= 0"),
                 ("llm_gpu_memory_utilization", 0 < self.llm_gpu_memory_utilization <= 1, "in (0, 1]"),
                 # more than one GPU is tensor parallelism: one engine rank per whole GPU
                 ("llm_num_gpus", self.llm_num_gpus <= 1 or self.llm_num_gpus == int(self.llm_num_gpus),
                  "<= 1 or a whole number (an engine over that many GPUs, tensor parallel)"),
                 _within_gpu_share(self, "llm_gpu_memory_utilization", "llm_num_gpus"),
                 ("num_cpus", self.num_cpus >= 0, ">= 0"))


# learner.correction -> (its source, the default of its bound in that source). Every correction
# recomputes the proximal policy π_prox (the learner's own, before the batch's first update), takes
# the clipped ratio π_θ / π_prox, and corrects for w = π_prox / π_behav (README, "Off-policy
# corrections", has the formulas; tests/learner/test_corrections.py restates each source's):
#   cap  C: a bound above w;  band (low, high): the w kept, the others masked
CORRECTION_SOURCES: dict[str, tuple[str, str, tuple]] = {
    # AReaL's decoupled PPO: tokens with w > C masked (weight 0, still in the denominator), the rest
    # weighted by w; C = 5 in AReaL's recipes (rejection_sampling: {metric: ratio, upper: 5.0})
    "decoupled": ("AReaL", "cap", (5.0,)),
    # verl's rollout_is=token / =sequence (TRL's token_truncate / sequence_truncate): min(w, C),
    # min(Π_t w_t, C); C = verl's rollout_is_threshold, 2.0
    "tis_token": ("verl", "cap", (2.0,)),
    "tis_seq": ("verl", "cap", (2.0,)),
    # IcePop (Ring-1T; TRL's token_mask): w inside the band, else 0 (in the denominator); the band
    # of INTELLECT-3's report and TRL's IcePop test, [0.5, 5]
    "mask_token": ("IcePop", "band", (0.5, 5.0)),
    # AReaL's rejection_sampling at level=sequence, metric=ratio, agg=mean: the geometric mean
    # w̄ = (Π_t w_t)^(1/T) inside the band, else the sequence is 0; its default band (0, 5]
    "mask_seq": ("AReaL", "band", (0.0, 5.0)),
    # TRL's vllm_importance_sampling_mode=sequence_mask (its default): the product Π_t w_t inside
    # [clip_min, clip_max], else 0; its defaults clip_min None, clip_max 3.0
    "mask_seq_product": ("TRL", "band", (0.0, 3.0)),
    # verl's rollout_rs token_k1 / seq_sum_k1 / seq_mean_k1: tokens (sequences) outside the band of
    # w (of Π_t w_t, of w̄) are rejected, out of the loss AND its denominator; kept ones weigh 1.
    # verl writes the band on π_behav/π_prox = 1/w: its "lo_hi" is this band (1/hi, 1/lo). Its
    # presets: seq_sum "0.5_2.0", seq_mean "0.999_1.001"; token_k1 has none: a bare 2.0 ([0.5, 2])
    "reject_token": ("verl", "band", (0.5, 2.0)),
    "reject_seq_sum": ("verl", "band", (0.5, 2.0)),
    "reject_seq_mean": ("verl", "band", (1 / 1.001, 1 / 0.999)),
}
Correction = Literal["none", "decoupled", "tis_token", "tis_seq", "mask_token", "mask_seq", "mask_seq_product",
                     "reject_token", "reject_seq_sum", "reject_seq_mean"]
# loss_agg, named after its source (kernels/reference.py): verl's agg_loss modes and TRL's dr_grpo
LossAgg = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm", "dr_grpo"]


@dataclass(frozen=True)
class LearnerConfig:
    lr: float = 1e-4
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    kl_coef: float = 0.0           # KL to a frozen reference; 0 = no reference model
    # k3 (TRL's; exp(x) - x - 1, x = log π_ref/π_θ) or verl's low_var_kl: the same with x clamped
    # to +-20 and the estimate to <= 10
    kl_estimator: Literal["k3", "low_var_kl"] = "k3"
    clip_low: float = 0.2
    clip_high: float = 0.2
    # verl's dual clip (clip_ratio_c, 3.0 and on by default there): for a negative advantage the
    # loss is at most dual_clip * |A|, however far the ratio grows. None: off
    dual_clip: float | None = None
    # drgrpo (no std): JURY-RL's ResZero fallback is small on purpose (c = 0.01); dividing by the
    # group's std would blow it up to the size of a proved group's signal (see README, Results)
    # gae: PPO with a learned value model (the critic, learner/critic.py): per-token GAE advantages,
    # whitened over the batch, as verl's default estimator computes them; works at any group_size, 1 too
    advantage: Literal["grpo", "drgrpo", "rloo", "gae"] = "drgrpo"
    # grpo's std over the G rewards: population (JURY-RL's formula) or unbiased (n - 1: verl's and
    # TRL's torch.std; 6.5% smaller advantages at G = 8, 29% at G = 2)
    adv_std: Literal["population", "unbiased"] = "population"
    adv_eps: float = 1e-6          # grpo: (r - mean) / (std + adv_eps); verl 1e-6, TRL 1e-4
    loss_agg: LossAgg = "token-mean"
    # correction=none: the clipped ratio is π_θ / π_behav, the generator's log-probs, unless
    # recompute_old, which takes it against the learner's own forward before the update (verl's
    # default, bypass_mode=false). Any correction recomputes anyway.
    recompute_old: bool = False
    # off-policy correction: CORRECTION_SOURCES above (README, "Off-policy corrections"). With
    # minibatches = epochs = 1 the only update runs at π_prox itself: the ratio is 1 and nothing is
    # clipped, the weight alone corrects
    correction: Correction = "none"
    # the correction's bound; None: its source's default (CORRECTION_SOURCES). is_cap for a cap, the
    # band (mask_low, mask_high) for the others
    is_cap: float | None = None
    mask_low: float | None = None
    mask_high: float | None = None
    # a non-finite loss or gradient never reaches the optimizer: that step is skipped and counted
    # (learner/nonfinite_skipped); this many batches in a row with one stop the run, naming the step
    max_nonfinite_steps: int = 3
    # DAPO's overlong reward shaping (Yu et al. 2025, arXiv:2503.14476, eq. 13; verl's
    # verl/workers/reward_manager/dapo.py, overlong_buffer): with L_max = generator.max_new_tokens and
    # L_cache = overlong_buffer, a completion of |y| tokens gets R_length added to its reward, for every
    # reward scheme, before the advantages: 0 up to L_max - L_cache tokens, then falling linearly to
    # -overlong_penalty at L_max (-overlong_penalty past it). 0: off. The paper's L_cache is 4096 of
    # 20480; verl's penalty_factor is overlong_penalty (the paper's is 1)
    overlong_buffer: int = 0
    overlong_penalty: float = 1.0
    # DAPO's overlong filtering (same paper, section 3.4): a truncated completion (finish reason
    # "length") leaves the loss and its denominators; its reward still counts in its group's mean and
    # std, as a loss mask does there (SkyRL's apply_overlong_filtering zeroes the loss mask only)
    overlong_filter: bool = False
    # ── advantage=gae: the critic (learner/critic.py; README "PPO with a value model") ──
    # Defaults are verl's (verl/trainer/config: algorithm.gamma, algorithm.lam, critic.optim.lr,
    # critic.optim.weight_decay, critic.cliprange_value): gamma = lam = 1, lr 1e-5, weight decay 0.01,
    # value clip 0.5. The value loss is aggregated as loss_agg says (verl's
    # critic.loss_agg_mode follows the actor's); grad_clip, the schedule and the mini-batches are the policy's
    gamma: float = 1.0             # discount per token
    lam: float = 1.0               # GAE's lambda: 1 = Monte-Carlo return minus the value, 0 = one-step TD
    critic_lr: float = 1e-5
    critic_weight_decay: float = 0.01
    value_clip: float = 0.5        # a new value may move at most this far from the batch's old one unpunished
    # the value model: "" = a copy of the policy's body with a fresh scalar head (verl's default: the
    # actor's folder read as a token classifier), or a Hugging Face folder (e.g. a trained critic/)
    critic_model: str = ""
    micro_batch: int = 64          # samples per forward/backward, per rank
    minibatches: int = 1           # optimizer steps per pass over a batch (PPO mini-batches)
    epochs: int = 1                # passes over each batch; the version still counts batches
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"  # after warm-up (learner/schedule.py)
    warmup_steps: int = 0          # optimizer steps of linear warm-up
    min_lr_ratio: float = 0.0      # linear and cosine decay end at lr * min_lr_ratio
    gradient_checkpointing: bool = False  # recompute activations in backward: less memory, more compute
    zero_stage: int = 0
    num_ranks: int = 1             # DeepSpeed data-parallel ranks, one Ray actor each (one GPU each on GPUs)
    dtype: Literal["float32", "bfloat16"] = "float32"
    threads: int = 1               # torch threads on the CPU, per rank
    num_cpus: float = 1.0          # per rank
    num_gpus: float = 0.0          # per rank
    resources: dict[str, float] = field(default_factory=dict)  # custom Ray resources per rank, e.g. {learner: 1}

    def __post_init__(self):
        _require(self, ("lr", self.lr > 0, "> 0"), ("weight_decay", self.weight_decay >= 0, ">= 0"),
                 ("grad_clip", self.grad_clip >= 0, ">= 0 (0: no clipping)"),
                 ("kl_coef", self.kl_coef >= 0, ">= 0"), ("clip_low", 0 <= self.clip_low < 1, "in [0, 1)"),
                 ("clip_high", self.clip_high >= 0, ">= 0"), ("adv_eps", self.adv_eps > 0, "> 0"),
                 ("dual_clip", self.dual_clip is None or self.dual_clip > 1, "> 1 (or null: off)"),
                 # a cap below 1, or a band without 1, would cut the tokens learner and sampler agree on
                 ("is_cap", self.is_cap is None or self.is_cap >= 1, ">= 1 (or null: the correction's default)"),
                 ("mask_low", self.mask_low is None or 0 <= self.mask_low <= 1, "in [0, 1]"),
                 ("mask_high", self.mask_high is None or self.mask_high >= 1, ">= 1"),
                 ("mask_high", self.band is None or self.band[1] > self.band[0],
                  "> mask_low (a band of one point masks every token)"),
                 ("is_cap", self.is_cap is None or self.bound_kind == "cap",
                  f"unset for correction={self.correction}: {self._bounded_by()}"),
                 ("mask_low", (self.mask_low is None and self.mask_high is None) or self.bound_kind == "band",
                  f"unset (mask_high too) for correction={self.correction}: {self._bounded_by()}"),
                 ("micro_batch", self.micro_batch >= 1, ">= 1"),
                 ("gamma", 0 <= self.gamma <= 1, "in [0, 1]"), ("lam", 0 <= self.lam <= 1, "in [0, 1]"),
                 ("critic_lr", self.critic_lr > 0, "> 0"), ("critic_weight_decay", self.critic_weight_decay >= 0, ">= 0"),
                 ("value_clip", self.value_clip > 0, "> 0"),
                 ("critic_model", not self.critic_model or self.advantage == "gae",
                  '"" unless advantage=gae (only GAE trains a value model)'),
                 ("max_nonfinite_steps", self.max_nonfinite_steps >= 1, ">= 1"),
                 ("overlong_buffer", self.overlong_buffer >= 0, ">= 0 (0: no overlong shaping)"),
                 ("overlong_penalty", self.overlong_penalty >= 0, ">= 0"),
                 ("minibatches", self.minibatches >= 1, ">= 1"), ("epochs", self.epochs >= 1, ">= 1"),
                 ("warmup_steps", self.warmup_steps >= 0, ">= 0"),
                 ("min_lr_ratio", 0 <= self.min_lr_ratio <= 1, "in [0, 1]"),
                 ("zero_stage", self.zero_stage in (0, 1, 2, 3), "0, 1, 2 or 3"),
                 ("num_ranks", self.num_ranks >= 1, ">= 1"),
                 ("threads", self.threads >= 1, ">= 1"),
                 # bf16 weights accumulate their micro-batches' gradients in fp32 (learner.py), a pairing
                 # DeepSpeed's stage 0 refuses ("unsupported mix"); ZeRO-1 takes it (its bf16 optimizer
                 # keeps fp32 master weights) and, like stage 0, leaves every rank's weights whole
                 ("zero_stage", self.dtype != "bfloat16" or self.zero_stage >= 1,
                  "1, 2 or 3 with dtype bfloat16 (gradients accumulate in fp32, which DeepSpeed's stage 0 "
                  "cannot do for bf16 weights; ZeRO-1 can)"),
                 ("num_cpus", self.num_cpus >= 0, ">= 0"), ("num_gpus", self.num_gpus >= 0, ">= 0"))

    @property
    def recompute_proximal(self) -> bool:
        """Whether each batch starts with a forward pass for π_prox (every correction, recompute_old)."""
        return self.correction != "none" or self.recompute_old

    def _bounded_by(self) -> str:
        return {"cap": "it has a cap (is_cap), not a band", "band": "it has a band (mask_low, mask_high), not a cap",
                None: "no correction, no bound"}[self.bound_kind]

    @property
    def bound_kind(self) -> str | None:
        """"cap" or "band": what bounds the correction's weight (None: no correction)."""
        return CORRECTION_SOURCES[self.correction][1] if self.correction != "none" else None

    @property
    def cap(self) -> float | None:
        """The correction's cap C, its source's default unless is_cap is set."""
        if self.bound_kind != "cap":
            return None
        return self.is_cap if self.is_cap is not None else CORRECTION_SOURCES[self.correction][2][0]

    @property
    def band(self) -> tuple[float, float] | None:
        """The correction's band (low, high) of w kept, its source's default unless set."""
        if self.bound_kind != "band":
            return None
        low, high = CORRECTION_SOURCES[self.correction][2]
        return (self.mask_low if self.mask_low is not None else low,
                self.mask_high if self.mask_high is not None else high)


# ── evaluation during training (eval.every; cluster/evaluation.py) ──
@dataclass(frozen=True)
class EvalConfig:
    """Held-out problems sampled through the run's own generators every `every` steps: data.eval_path,
    or for the synthetic task a held-out stream of its own. Metrics eval/pass@1, eval/pass@{samples},
    eval/distinct_answers; they never pass through the feeder, so staleness is not touched."""

    every: int = 0             # learner steps between evaluations; 0 = none
    problems: int = 64         # the first N problems of the evaluation set; 0 = all of it
    samples: int = 8           # per problem: pass@1 and pass@samples (unbiased estimator)
    temperature: float = 1.0
    top_p: float = 1.0         # the evaluation's nucleus (JURY-RL's Table 6: 0.95 at temperature 0.8)
    max_new_tokens: int = 0    # 0 = generator.max_new_tokens

    def __post_init__(self):
        _require(self, ("every", self.every >= 0, ">= 0"), ("problems", self.problems >= 0, ">= 0"),
                 ("samples", self.samples >= 1, ">= 1"), ("temperature", self.temperature >= 0, ">= 0"),
                 ("top_p", 0 < self.top_p <= 1, "in (0, 1]"),
                 ("max_new_tokens", self.max_new_tokens >= 0, ">= 0"))


# ── experiment tracking (tracking: [tensorboard, wandb]; cluster/tracking.py) ──
TRACKERS = ("tensorboard", "wandb")


@dataclass(frozen=True)
class WandbConfig:
    """Weights & Biases settings, used when `tracking` names wandb."""

    project: str = "jury-rl"
    entity: str = ""  # a W&B user or team; "" = the logged-in user's default
    # auto: online where a user has logged in (WANDB_API_KEY, or the W&B host in the netrc file),
    # else offline: the run is written under run_dir/wandb/ and `wandb sync` uploads it later
    mode: Literal["auto", "offline", "online"] = "auto"

    def __post_init__(self) -> None:
        _require(self, _one_of(self, "mode"), ("project", bool(self.project.strip()), "not empty"))


# ── the reward-hacking monitor (monitor.*; learner/shadow.py, cluster/monitor.py) ──
@dataclass(frozen=True)
class MonitorConfig:
    """Watches a run for reward hacking while it goes. Per step, whatever the reward scheme: the
    training reward's agreement with the dataset's labels where they exist (a shadow metric: a scheme
    that does not read labels is handed its groups without them, verifiers/schemes.py), as precision
    and recall by staleness bucket, and the signals below, each with its threshold. A signal is
    compared through its mean over the last `window` steps; it warns once it has stayed past its
    threshold `persist_steps` steps in a row (one line on the terminal, `monitor/onset/<signal>` in
    metrics.jsonl) and again only after `quiet_steps` steps in a row back inside its threshold.
    Ratios are against the signal's mean over the run's first `baseline_steps` steps."""

    enabled: bool = True
    window: int = 3            # steps averaged before a signal is compared with its threshold
    # a signal that warned warns again only after this many steps in a row back inside its threshold:
    # with 8 groups a step a share moves by 1/8, and a mean near its threshold would cross it every
    # few steps (the majority-vote benchmark's precision warned 23 times in 300 steps with 1)
    quiet_steps: int = 10
    # a signal warns only once it has been past its threshold this many steps in a row (kl_high: at
    # once, a KL that far is a broken policy). A step's shares move by 1/8 with 8 groups, and a
    # healthy run's means cross a threshold for a step or two: replayed over the recorded 300-step
    # healthy run, 1 (the old rule) gave 12 warnings, 3 gave 4, 4 gave 1 and 5 none, while each run
    # built to hack still warned before its pass rate fell, 4 steps later than with 1
    # (docs/results.md, "The reward-hacking monitor")
    persist_steps: int = 5
    baseline_steps: int = 3    # the run's first steps, the baseline of every ratio below
    # the reward's precision: of the samples it pays above their group's mean (a positive advantage),
    # the share the label calls correct. Below this, more than half of what it reinforces is wrong
    min_precision: float = 0.5
    # ... or fallen to this share of its baseline (a reward that was right and has stopped being so)
    min_precision_ratio: float = 0.7
    # a group in consensus: its majority answer holds at least this share of its samples
    consensus_share: float = 0.75
    # spurious consensus with labels: groups in consensus on an answer the label calls wrong, as a
    # share of the step's labelled groups
    max_consensus_wrong: float = 0.25
    # ... without labels: groups in consensus whose proof gate stayed inconclusive, as a share of the
    # groups the gate was asked about (JURY-RL's gate; other schemes ask none)
    max_consensus_unproved: float = 0.5
    # answers without reasoning: samples shorter than short_ratio x the run's median completion
    # length that still earn more than their group's mean, as a share of the step's samples
    short_ratio: float = 0.25
    max_short_rewarded: float = 0.1
    # length collapse and blow-up: the mean completion length against its baseline
    min_length_ratio: float = 0.5
    max_length_ratio: float = 2.0
    # entropy collapse: the policy's mean token entropy (learner/entropy) against its baseline
    min_entropy_ratio: float = 0.3
    # KL acceleration, for each KL the run logs (to the reference, or to the behaviour policy, and
    # to the run's first policy): the rise of its median over the last kl_window steps from the
    # kl_window before at least kl_accel times the rise before that, and at least kl_min_rise (nats
    # per token): steady drift does not fire, growth that speeds up does. Its own, longer window:
    # the KLs are estimated on the sampled tokens (k3), and one step's estimate may be several times
    # the next (0.1 to 0.9 in a healthy run of the embedded default, whose rises over 8 steps stayed
    # below 0.1 while its KL to the first policy grew to 0.2)
    kl_window: int = 8
    kl_accel: float = 3.0
    kl_min_rise: float = 0.1
    # ... and any of those KLs above this level (its mean over `window` steps, nats per token): a
    # policy that moved this far broke, whatever the trend (the healthy default's KL to the learner
    # stayed below 0.005 and to its first policy below 0.7; at learner.lr=1e-3 on the chain task the
    # first update took the learner's KL to the behaviour policy to 1,271)
    max_kl: float = 1.0
    # the KL to the run's first policy (learner/initial_kl): the learner keeps a frozen copy of the
    # starting weights (the reference model, when kl_coef > 0, is that copy) and scores this many of
    # each step's samples under it, evenly spaced (a no-grad forward of those rows); 0: not measured
    # (no copy kept)
    initial_kl_rows: int = 64

    def __post_init__(self):
        _require(self, *_at_least(self, 1, "window", "baseline_steps", "kl_window", "quiet_steps",
                                         "persist_steps"),
                 *_at_least(self, 0, "initial_kl_rows"),
                 *((name, 0 <= getattr(self, name) <= 1, "in [0, 1]") for name in (
                     "min_precision", "min_precision_ratio", "consensus_share", "max_consensus_wrong",
                     "max_consensus_unproved", "short_ratio", "max_short_rewarded", "min_length_ratio",
                     "min_entropy_ratio")),
                 ("consensus_share", self.consensus_share > 0.5, "> 0.5 (a majority)"),
                 ("max_length_ratio", self.max_length_ratio > 1, "> 1"),
                 ("kl_accel", self.kl_accel > 1, "> 1 (a rise faster than the one before)"),
                 ("kl_min_rise", self.kl_min_rise >= 0, ">= 0"), ("max_kl", self.max_kl > 0, "> 0"))


@dataclass(frozen=True)
class RunConfig:
    # "tiny": build (or reuse) the local tiny model ("tiny-chat": with a chat template; "tiny-chain": the one
    # warmed up on the chain task, models/chain.py); else a HF folder
    model: str = "tiny"
    # a built-in task, "synthetic" (short arithmetic) or "chain" (sums of 2 to 40 terms worked step by step,
    # long-tailed lengths: data/tasks.py), or a JSONL or Parquet file or a `datasets` folder (read as data.* says)
    dataset: str = "synthetic"
    seed: int = 0
    steps: int = 300               # learner steps
    batch_groups: int = 8          # groups (prompts) per learner step
    max_staleness: int = 1         # 0 = synchronous on-policy
    sync_every: int = 1            # learner steps between weight syncs
    # staleness as an independent variable: every group is trained exactly k versions after the
    # policy that generated it, whatever the hardware speed. 2: k = 2 for all; {0: 1, 4: 3}: k drawn
    # per group with those weights (seeded). {} = off (max_staleness is then only a bound)
    forced_staleness: dict[int, float] = field(default_factory=dict)
    record_groups: bool = False    # write every trained batch to run_dir/record/ (for `jury replay`)
    # DAPO's dynamic sampling (Yu et al. 2025, arXiv:2503.14476, section 3.2; verl's
    # algorithm.filter_groups, metric acc): a group whose rewards are all equal (before the overlong
    # penalty, as DAPO's accuracy rule; or after it: zero advantage) is dropped, and more prompts are
    # admitted (refills) until the step holds
    # batch_groups groups with signal, at most max_refills per step; past that cap the step trains
    # on the groups with signal it has (learner/dynamic.py, README "Dynamic sampling")
    dynamic_sampling: bool = False
    max_refills: int = 8
    # how a learner step's batch is formed. "batch": batch s is the admission indices [s·B, (s+1)·B), so
    # a step waits for its slowest group while later ones are done. "continuous": the first
    # batch_groups groups scored, whatever their indices (as AReaL's and PipelineRL's trainers take
    # them). The feeder's budget is the same, at most (v + max_staleness + 1)·batch_groups tasks
    # admitted while the generators hold version v (learner/inbox.py, README "Continuous admission").
    # With dynamic_sampling: the first batch_groups groups scored that have signal; each of the first
    # max_refills flat groups a step filters frees its place for a new task (learner/dynamic.py)
    admission: Literal["batch", "continuous"] = "batch"
    # continuous admission: a group that later groups overtook can reach a step more than
    # max_staleness versions after the policy that started it. "drop": it is not trained (counted,
    # learner/stale_dropped) and a new task takes its place in the budget, so the bound holds
    # exactly; "train": it is trained anyway, and its staleness is in the ledger as it is
    over_budget: Literal["drop", "train"] = "drop"
    num_generators: int = 1
    num_verifiers: int = 1
    max_model_len: int = 256
    max_prompt_tokens: int = 128   # longer prompts are refused by the feeder (counted)
    weight_backend: Literal["gloo", "nccl"] = "gloo"
    bucket_mb: int = 64
    # ZeroMQ CURVE: encrypt the data plane and refuse peers without the run's keys (handed out through
    # Ray). On by default, on one machine too: a loopback port is open to every process of the machine,
    # and a stranger's PULL socket on the feeder's port would take tasks in turn with the generators.
    # It costs nothing measurable (docs/results.md, Transport). auto: on only when the Ray cluster has
    # more than one node; false: off
    curve: Literal["auto", True, False] = True
    checkpoint_every: int = 0      # learner steps between checkpoints (0: only the final one)
    # where the learner writes checkpoints (default: the run folder). The learner writes on its
    # own node: on a cluster give a path every node shares (NFS, EFS), or they stay on that node
    checkpoint_dir: str = ""
    max_restarts: int = 3          # Ray restarts of a crashed generator or verifier
    # with every worker up, groups still missing after this long are re-sent; a restarted worker's are
    # re-sent as soon as it is wired back in (the driver looks every 5 s while a batch is missing)
    resend_after_s: float = 120.0
    # every wait of a weight sync (forming the group, the broadcast, each engine's acknowledgement):
    # past it the run stops naming the role it waited for, instead of hanging
    sync_timeout_s: float = 300.0
    # refuse at start a run whose actors do not fit the cluster's nodes (off on a cluster that
    # autoscales: the nodes it will add are not there to count yet)
    check_resources: bool = True
    # fault injection, action:target@step[:seconds]: kill (-9 from outside), kill_engine (-9 of a
    # generator's vLLM engine core), kill_pool (-9 of a verifier's check process), freeze (SIGSTOP of a
    # generator's or verifier's process: the run must fail naming it, leaving no process behind),
    # slow (seconds per item), raise (the worker's own loop raises on its next item),
    # e.g. "kill:verifier0@3,slow:generator0@2:5"; a fault at the run's first step hits before its first
    # tasks are sent (slow:generator0@0:3 slows every task)
    faults: str = ""
    run_dir: str = ""              # default: runs/<timestamp>
    # the learner gives up waiting for a batch after this; a worker that answers nothing this long
    # (frozen) fails the run, naming it
    group_timeout_s: float = 600.0
    progress: bool = True
    # experiment trackers fed beside metrics.jsonl, which stays the record: tensorboard writes
    # run_dir/tensorboard/, wandb a W&B run (the `wandb` section); [] = none
    tracking: tuple[Literal["tensorboard", "wandb"], ...] = ()
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    verifier: VerifierConfig = field(default_factory=VerifierConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    lean: LeanGateConfig = field(default_factory=LeanGateConfig)  # verifier.gate=lean: models, Lean command
    derl: DerlConfig = field(default_factory=DerlConfig)  # DeRL's diversifying prompts and reward (derl.enabled)
    data: DataConfig = field(default_factory=DataConfig)  # fields, epochs, shuffling, bad rows, the prompt template
    eval: EvalConfig = field(default_factory=EvalConfig)  # evaluation during training (eval.every)
    wandb: WandbConfig = field(default_factory=WandbConfig)  # tracking: [wandb]: project, entity, mode
    monitor: MonitorConfig = field(default_factory=MonitorConfig)  # the reward-hacking monitor, on by default

    def __post_init__(self):
        positive = ["steps", "batch_groups", "sync_every", "num_generators", "num_verifiers",
                    "max_model_len", "max_prompt_tokens", "bucket_mb"]
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_staleness < 0:
            raise ConfigError(f"max_staleness must be >= 0, got {self.max_staleness}")
        if self.max_staleness < self.sync_every - 1:
            # generators only see a new version every sync_every steps, so groups are
            # necessarily up to sync_every - 1 versions old; a tighter bound would deadlock
            raise ConfigError(f"max_staleness ({self.max_staleness}) must be >= sync_every - 1 ({self.sync_every - 1})")
        if self.max_prompt_tokens + self.generator.max_new_tokens > self.max_model_len:
            raise ConfigError(
                f"max_prompt_tokens + generator.max_new_tokens ({self.max_prompt_tokens} + "
                f"{self.generator.max_new_tokens}) exceeds max_model_len ({self.max_model_len})")
        # generator i samples with seed + i, which vLLM hands to numpy (at most 2**32 - 1)
        _require(self, ("seed", 0 <= self.seed <= 2**32 - self.num_generators,
                        f"in [0, 2**32 - num_generators] ({2**32 - self.num_generators})"),
                 ("checkpoint_every", self.checkpoint_every >= 0, ">= 0"),
                 ("max_restarts", self.max_restarts >= 0, ">= 0"), ("resend_after_s", self.resend_after_s > 0, "> 0"),
                 ("sync_timeout_s", self.sync_timeout_s > 0, "> 0"),
                 ("group_timeout_s", self.group_timeout_s > 0, "> 0"),
                 ("resend_after_s", self.resend_after_s < self.group_timeout_s,
                  f"< group_timeout_s ({self.group_timeout_s:g}): missing groups are re-sent before the run gives up"),
                 ("model", bool(self.model), '"tiny", "tiny-chat", "tiny-chain" or a Hugging Face model folder'),
                 ("dataset", bool(self.dataset), '"synthetic", "chain" or a path'))
        self._check_gae()
        rows = self.batch_groups * self.generator.group_size // self.learner.num_ranks
        if self.learner.minibatches > rows:
            raise ConfigError(f"learner.minibatches ({self.learner.minibatches}) exceeds a rank's samples per step "
                              f"(batch_groups x group_size / num_ranks = {rows}): the extra optimizer steps would "
                              "train on nothing")
        drawing = ("dynamic_sampling" if self.dynamic_sampling else
                   "admission=continuous with over_budget=drop" if self.admission == "continuous"
                   and self.over_budget == "drop" else "")
        if self.data.epochs and drawing:
            raise ConfigError(f"data.epochs={self.data.epochs} with {drawing}: the problems that refill a filtered "
                              "or dropped group's place come from the same stream, past the passes data.epochs "
                              "allows, and it would run dry near the run's end; bound the run with `steps` "
                              "instead (data.epochs=0)")
        if self.eval.every and self.eval.max_new_tokens + self.max_prompt_tokens > self.max_model_len:
            raise ConfigError(f"eval.max_new_tokens + max_prompt_tokens ({self.eval.max_new_tokens} + "
                              f"{self.max_prompt_tokens}) exceeds max_model_len ({self.max_model_len})")
        if self.eval.every and self.dataset not in ("synthetic", "chain") and not self.data.eval_path:
            raise ConfigError("eval.every needs problems to evaluate: set data.eval_path (the built-in tasks, "
                              "synthetic and chain, use a held-out stream of their own)")
        if self.weight_backend == "nccl" and (self.learner.num_gpus < 1 or self.generator.num_gpus <= 0):
            raise ConfigError("weight_backend=nccl runs between GPUs only: it needs learner.num_gpus >= 1 and "
                              f"generator.num_gpus > 0 (got {self.learner.num_gpus} and {self.generator.num_gpus}); "
                              "use weight_backend=gloo on the CPU")
        if self.weight_backend == "nccl" and self.num_generators > 1 and 0 < self.generator.num_gpus < 1:
            raise ConfigError(f"weight_backend=nccl with num_generators={self.num_generators} needs generator.num_gpus "
                              f">= 1 (got {self.generator.num_gpus:g}): generators sharing a GPU would be two ranks "
                              "of the weight group on one GPU, which NCCL refuses at the first sync; use "
                              "weight_backend=gloo, or a GPU per generator")
        if self.learner.overlong_buffer > self.generator.max_new_tokens:
            raise ConfigError(f"learner.overlong_buffer ({self.learner.overlong_buffer}) exceeds "
                              f"generator.max_new_tokens ({self.generator.max_new_tokens}): the buffer is the last "
                              "tokens before the generation limit")
        parse_faults(self.faults, self.num_generators, self.num_verifiers, self.learner.num_ranks)
        self._check_coreward()
        if self.dynamic_sampling and self.max_refills < 1:
            raise ConfigError(f"max_refills must be >= 1 with dynamic_sampling, got {self.max_refills}")
        if self.dynamic_sampling and self.forced_staleness:
            raise ConfigError("dynamic_sampling with forced_staleness: refills are admitted when a step finds "
                              "flat groups, which the forced schedule (each task released exactly k versions "
                              "before its batch) cannot know in advance; pick one")
        if self.dynamic_sampling and self.verifier.reward in ("self_certainty", "entropy"):
            raise ConfigError(f"dynamic_sampling with verifier.reward={self.verifier.reward}: those rewards are "
                              "scored in the learner's forward, after the batch is chosen, so flat groups "
                              "cannot be told before training")
        if self.admission == "continuous" and self.forced_staleness:
            raise ConfigError("admission=continuous with forced_staleness: the forced schedule releases each task "
                              "exactly k versions before its batch, and under continuous admission a task has no "
                              "batch until it is scored; pick one")
        if self.forced_staleness and self.sync_every != 1:
            raise ConfigError("forced_staleness needs sync_every: 1 (a version per step is what k counts)")
        if any(type(k) is not int or k < 0 or isinstance(w, bool) or not isinstance(w, (int, float))
               or not 0 < w < math.inf for k, w in self.forced_staleness.items()):
            raise ConfigError(f"forced_staleness must be k or {{k: weight}} with k >= 0 and finite weights > 0, "
                              f"got {self.forced_staleness!r}")
        object.__setattr__(self, "tracking", tuple(self.tracking))  # YAML hands in a list
        if any(t not in TRACKERS for t in self.tracking) or len(set(self.tracking)) != len(self.tracking):
            raise ConfigError(f"tracking must list each of {list(TRACKERS)} at most once, got {list(self.tracking)}")


    def _check_gae(self):
        """A group of one sample has group advantage 0: only a value baseline (gae) learns from it.
        What reads group rewards as the baseline does not mix with gae."""
        gae = self.learner.advantage == "gae"
        if self.generator.group_size < 2 and not gae:
            raise ConfigError(f"generator.group_size must be >= 2 (a group of one sample has advantage 0 under "
                              f"learner.advantage={self.learner.advantage}: nothing would be trained; "
                              f"learner.advantage=gae learns from single samples), got {self.generator.group_size}")
        if gae and self.dynamic_sampling:
            raise ConfigError("dynamic_sampling with learner.advantage=gae: it drops groups whose rewards are all "
                              "equal because their group advantage is 0, but a value baseline gives them signal "
                              "(and at group_size 1 every group is such a group)")
        if gae and self.verifier.reward in ("self_certainty", "entropy"):
            raise ConfigError(f"verifier.reward={self.verifier.reward} with learner.advantage=gae: the learner "
                              "scores those rewards into group advantages; GAE's per-token rewards from them are "
                              "not wired")

    def _check_coreward(self):
        """Rewrites are read (data.rewrite_key) or written (verifier.rewrites=llm) only for CoReward."""
        v = self.verifier
        from_data = v.reward == "coreward" and v.rewrites == "data"
        if from_data and not self.data.rewrite_key:
            raise ConfigError("verifier.reward=coreward with verifier.rewrites=data needs data.rewrite_key, the "
                              "dataset's field with each problem rewritten (or verifier.rewrites=llm)")
        if self.data.rewrite_key and not from_data:
            raise ConfigError(f"data.rewrite_key ({self.data.rewrite_key!r}) is read only under "
                              f"verifier.reward=coreward with verifier.rewrites=data")
        if from_data and self.dataset in ("synthetic", "chain"):
            raise ConfigError(f"verifier.rewrites=data reads data.rewrite_key from a dataset file; the built-in "
                              f"{self.dataset!r} task has no rewrites (use verifier.rewrites=llm)")
        if v.reward == "coreward" and self.derl.enabled:
            raise ConfigError("derl.enabled with verifier.reward=coreward: DeRL's diversifying prompts and "
                              "CoReward's rewrites would both reshape the prompt; pick one")


FaultAction = Literal["kill", "kill_engine", "kill_pool", "freeze", "slow", "raise"]
FaultRole = Literal["generator", "verifier", "learner"]
# what each role's faults may be: kill -9 from outside, kill -9 of the vLLM engine core under a
# generator or of a verifier's check process, SIGSTOP of the actor's process (frozen for good: it
# neither answers nor dies), a slowdown per item, the worker's own loop raising
FAULT_ACTIONS: dict[str, tuple[str, ...]] = {"generator": ("kill", "kill_engine", "freeze", "slow", "raise"),
                                             "verifier": ("kill", "kill_pool", "freeze", "slow", "raise"),
                                             "learner": ("kill",)}


@dataclass(frozen=True)
class Fault:
    action: FaultAction
    role: FaultRole
    index: int        # generator<index>, verifier<index>, learner rank <index>
    step: int         # applied before this learner step
    seconds: float = 0.0

    @property
    def target(self) -> str:
        return f"{self.role}{self.index}"


def parse_faults(text: str, num_generators: int = 1, num_verifiers: int = 1, num_learners: int = 1) -> list[Fault]:
    """"kill:verifier0@3,slow:generator0@2:5" -> Faults; a bad item is refused naming it."""
    faults = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        try:
            action, rest = item.split(":", 1)
            target, when = rest.split("@", 1)
            step, _, seconds = when.partition(":")
            role = target.rstrip("0123456789")
            fault = Fault(action, role, int(target[len(role):]), int(step), float(seconds or 0))
        except ValueError:
            raise ConfigError(f"faults: {item!r} is not action:target@step[:seconds]") from None
        limit = {"generator": num_generators, "verifier": num_verifiers, "learner": num_learners}.get(role)
        if action not in FAULT_ACTIONS.get(role, ()) or limit is None or not 0 <= fault.index < limit or fault.step < 0:
            raise ConfigError(f"faults: {item!r}: action kill|freeze|slow|raise (kill_engine for a generator, kill_pool "
                              f"for a verifier), target generator<i>|verifier<i>|learner<rank> that exists (a learner rank "
                              f"can only be killed), step >= 0")
        faults.append(fault)
    return faults
