"""TRL's per-step lines, as transformers prints them, read by the arena's job script the way the
arena's Rust reader does (domain::training::log): the simulated pipeline's lines, the format of
transformers 5.13's ProgressCallback (each float as f"{v:.4g}" in quotes), and lines that are not
a step."""

import importlib.util
import json
import math
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


JOB = load("arena_job_under_test", ROOT / "public" / "arena_job.py")
sys.path.insert(0, str(ROOT / "standin" / "sim"))
from posttrainarena_sim import grpo  # noqa: E402


def test_the_job_script_reads_transformers_lines():
    line = ("{'loss': '0.01235', 'grad_norm': '0.5341', 'learning_rate': '1e-06', 'num_tokens': '1.235e+05', "
            "'completions/mean_length': '187.2', 'rewards/verifier_reward/mean': '0.375', 'reward': '0.375', "
            "'reward_std': '0.3535', 'frac_reward_zero_std': '0.5', 'kl': None, 'step_time': '12.35', 'epoch': '0.0125'}")
    assert JOB.trl_metrics(line) == {
        "loss": 0.01235, "grad_norm": 0.5341, "learning_rate": 1e-06, "completions/mean_length": 187.2, "reward": 0.375,
        "reward_std": 0.3535, "frac_reward_zero_std": 0.5}
    # After a progress bar's carriage return; a nan is left out.
    assert JOB.trl_metrics(" 10%|#  | 1/10\r{'loss': 'nan', 'reward': '1'}") == {"reward": 1.0}


def test_lines_that_are_not_a_step_are_nothing():
    assert JOB.trl_metrics("{'train_runtime': '1235', 'train_loss': '0.004321', 'epoch': '1'}") is None
    assert JOB.trl_metrics("[posttrainarena] grpo_gate_eval: bench eval run") is None
    assert JOB.trl_metrics("{'loss': __import__('os').system('true')}") is None
    assert JOB.trl_metrics("{'loss': '" + "1" * 20000 + "'}") is None


def test_the_simulated_trainer_prints_what_the_job_script_reads():
    logs = grpo.step_logs("run-x", 0, 10, 1e-6, [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0], 4)
    line = grpo.trl_line(logs)
    read = JOB.trl_metrics(line)
    assert set(read) == {"loss", "grad_norm", "learning_rate", "completions/mean_length", "reward", "reward_std",
                         "frac_reward_zero_std"}
    # Four significant figures, as transformers formats them.
    assert all(math.isclose(read[k], float("%.4g" % logs[k])) for k in ("loss", "reward", "reward_std"))
    assert read["frac_reward_zero_std"] == 0.5


def test_the_job_keeps_the_domains_metric_names():
    """One name per metric: the job script's list is the domain's `TrainMetrics` table."""
    names = json.loads((ROOT / "tests" / "fixtures" / "metric-names.json").read_text())
    assert JOB.TRL_METRICS == names["collection"]
