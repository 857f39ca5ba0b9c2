"""DeRL (Diverse-Exploration RL): proof plans (plans.py), the diversity reward (reward.py), and
the scheme a verifier worker runs (scorer.py). The prompt mix is data/derl.py.

Entry points:
    DerlScheme(DerlScorer(cfg, judge_client, seed), inner_scheme)   the run's scheme, wrapped
    make_proof_plans(client, requests, cfg)                         plans for stored CoTs
"""
from jury.verifiers.derl.plans import make_proof_plans
from jury.verifiers.derl.scorer import DerlScheme, DerlScorer

__all__ = ["DerlScheme", "DerlScorer", "make_proof_plans"]
