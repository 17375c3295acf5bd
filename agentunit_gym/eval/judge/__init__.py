"""The judge: goal fidelity and AgentEval-style criteria (critic, quantifier, verifier) over
recorded runs, through the one model client (docs/judge.md)."""

from agentunit_gym.eval.judge.criteria import CriteriaSet, Criterion, load_criteria_file
from agentunit_gym.eval.judge.run import JudgeConfig, JudgedEpisode, JudgeOutcome, judge_run, parse_judge_spec

__all__ = ["CriteriaSet", "Criterion", "JudgeConfig", "JudgeOutcome", "JudgedEpisode", "judge_run",
           "load_criteria_file", "parse_judge_spec"]
