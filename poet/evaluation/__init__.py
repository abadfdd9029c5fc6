"""Evaluation: the Evaluator protocol, the rollout core and its implementations."""

from poet.evaluation.inprocess import InProcessEvaluator
from poet.evaluation.jobs import Job, JobResult
from poet.evaluation.noise import NoiseTable, perturb
from poet.evaluation.protocol import EvalError, EvalRequest, EvalResult, Evaluator, Perturbation, PolicyRef
from poet.evaluation.requests import RequestTable, RequestTableBuilder

__all__ = [
    "EvalError",
    "EvalRequest",
    "EvalResult",
    "Evaluator",
    "InProcessEvaluator",
    "Job",
    "JobResult",
    "NoiseTable",
    "Perturbation",
    "PolicyRef",
    "RequestTable",
    "RequestTableBuilder",
    "perturb",
]
