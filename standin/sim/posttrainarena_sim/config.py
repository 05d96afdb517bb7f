"""The pipeline's config loader, simulated from `reference/pipeline.md` §4 (the held-out branch's
`config.py`): required `[harness]` and `[evaluation]` tables, typed tables that refuse unknown keys
(`TypeError: …unexpected keyword argument`), untyped ones that ignore them, `[[eval_suites]]` or
`[eval_dataset]`, and `validate()` collecting every problem into one `ValueError`."""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUITE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(frozen=True)
class DatasetConfig:
    repo_id: str
    revision: str
    task_list: Path
    path: str = "tasks"


@dataclass(frozen=True)
class EvalSuite:
    name: str
    dataset: DatasetConfig


@dataclass(frozen=True)
class RuntimeConfig:
    sandbox: str | None = None
    sandbox_user: str | None = "agent"
    max_completion_length: int = 2048
    num_generations: int = 8


@dataclass(frozen=True)
class HarnessConfig:
    agent: str = "opencode"
    skill_mode: str = "no-skill"
    usage_tracking: str = "required"
    external_directory_allow: tuple = ("/home/user/input/**",)
    deny_bash_patterns: tuple = ("*<<*",)
    concurrency: int = 1
    sandbox_setup_timeout_sec: int = 300
    agent_idle_timeout_sec: int = 300
    agent_timeout_sec: int = 900
    reasoning_effort: str | None = None
    max_infra_error_fraction: float = 0.1


@dataclass(frozen=True)
class EvaluationConfig:
    base_model_env: str = "BENCHFLOW_BASE_MODEL"
    student_model_env: str = "BENCHFLOW_ADAPTER_MODEL"
    base_url_env: str = "BENCHFLOW_PROVIDER_BASE_URL"
    control_url_env: str = "BENCHFLOW_MODEL_BRIDGE_CONTROL_URL"
    api_key_env: str = "BENCHFLOW_PROVIDER_API_KEY"
    sync_base_to_vllm: bool = False
    trials: int = 1


@dataclass(frozen=True)
class TeacherConfig:
    enabled: bool = True
    model: str = "glm/glm-5.1"
    source_model: str | None = None
    source_revision: str | None = None
    max_attempts: int = 3
    min_verified: int = 1
    require_all_tasks: bool = True
    min_reward: float = 1.0
    max_accepted_total_tokens: int = 200000
    max_accepted_tool_calls: int = 50


@dataclass(frozen=True)
class SftConfig:
    enabled: bool = True
    num_train_epochs: float = 1.0
    max_steps: int | None = None
    learning_rate: float = 2e-5
    max_length: int = 4096
    gradient_accumulation_steps: int = 8
    gradient_checkpointing: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05


@dataclass(frozen=True)
class GrpoConfig:
    enabled: bool = True
    run_policy: str = "on_reward"
    threshold: float = 0.05
    gate_task_count: int = 4
    num_train_epochs: float = 1.0
    max_steps: int | None = None
    learning_rate: float = 1e-6
    gradient_accumulation_steps: int = 8
    gradient_checkpointing: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    log_completions: bool = False
    generation_batch_size: int | None = None
    rollout_attempts: int = 2
    require_reward_variance: bool = False
    vllm_server_base_url_env: str = "TRL_VLLM_SERVER_BASE_URL"
    seed: int = 42
    task_sampler: str = "trl"
    require_full_coverage: bool = True
    rollout_failure_policy: str = "raise"
    max_masked_rollout_fraction: float = 0.25
    lora_target_parameters: tuple = ()


@dataclass(frozen=True)
class TrackingConfig:
    report_to: str = "wandb"
    project: str = "posttrainarena-benchflow"


@dataclass(frozen=True)
class PipelineConfig:
    source: Path
    model: str
    model_revision: str | None
    train_dataset: DatasetConfig
    eval_dataset: DatasetConfig
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    harness: HarnessConfig = field(default_factory=HarnessConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    sft: SftConfig = field(default_factory=SftConfig)
    grpo: GrpoConfig = field(default_factory=GrpoConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    output_root: Path = Path("runs")
    eval_suites: tuple = ()

    @property
    def sandbox(self) -> str:
        return self.runtime.sandbox or "daytona"

    @property
    def suites(self) -> tuple:
        """The held-out suites in order; a legacy config is one suite named `eval`."""
        return self.eval_suites or (EvalSuite("eval", self.eval_dataset),)

    @property
    def generation_batch(self) -> int:
        return self.grpo.generation_batch_size or self.runtime.num_generations * self.harness.concurrency

    def problems(self) -> list[str]:
        """Every problem of the config, table by table in the loader's order."""
        return (self.harness_problems() + self.evaluation_problems() + self.training_problems()
                + self.teacher_problems())

    def harness_problems(self) -> list[str]:
        p: list[str] = []
        h = self.harness
        if h.agent != "opencode":
            p.append("harness.agent must be opencode")
        if h.skill_mode not in {"no-skill", "with-skill"}:
            p.append("harness.skill_mode must be no-skill or with-skill")
        if h.usage_tracking != "required":
            p.append("harness.usage_tracking must be required")
        if not h.external_directory_allow or any(not str(x).startswith("/") for x in h.external_directory_allow):
            p.append("harness.external_directory_allow must contain absolute paths")
        if not h.deny_bash_patterns or any(not isinstance(x, str) or not x for x in h.deny_bash_patterns):
            p.append("harness.deny_bash_patterns must contain strings")
        for key in ("concurrency", "sandbox_setup_timeout_sec", "agent_idle_timeout_sec", "agent_timeout_sec"):
            if not _positive(getattr(h, key)):
                p.append(f"harness.{key} must be positive")
        f = h.max_infra_error_fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 <= f <= 0.5:
            p.append("harness.max_infra_error_fraction must be between 0 and 0.5")
        if h.reasoning_effort is not None and (not isinstance(h.reasoning_effort, str) or not h.reasoning_effort.strip()):
            p.append("harness.reasoning_effort must be a non-empty string")
        return p

    def evaluation_problems(self) -> list[str]:
        """`[evaluation]` and the held-out suites' names."""
        p: list[str] = []
        e = self.evaluation
        for key in ("base_model_env", "student_model_env", "base_url_env", "control_url_env", "api_key_env"):
            value = getattr(e, key)
            if not isinstance(value, str) or not value.strip():
                p.append(f"evaluation.{key} must be a non-empty string")
        if not isinstance(e.sync_base_to_vllm, bool):
            p.append("evaluation.sync_base_to_vllm must be boolean")
        if not _positive(e.trials):
            p.append("evaluation.trials must be a positive integer")
        names = [suite.name for suite in self.suites]
        if any(not isinstance(n, str) or not SUITE_NAME.match(n) for n in names):
            p.append("eval_suites names must match " + SUITE_NAME.pattern)
        if len(set(names)) != len(names):
            p.append("eval_suites names must be unique")
        return p

    def training_problems(self) -> list[str]:
        """`[runtime]` and `[grpo]`."""
        p: list[str] = []
        g, r = self.grpo, self.runtime
        if self.sandbox not in {"docker", "daytona"}:
            p.append("runtime.sandbox must be docker or daytona")
        if r.num_generations < 2:
            p.append("runtime.num_generations must be at least 2 for GRPO")
        if r.max_completion_length < 1:
            p.append("runtime.max_completion_length must be positive")
        if not 0 <= g.threshold <= 1:
            p.append("grpo.threshold must be between 0 and 1")
        if g.run_policy not in {"on_reward", "always"}:
            p.append("grpo.run_policy must be on_reward or always")
        if g.gate_task_count < 1:
            p.append("grpo.gate_task_count must be positive")
        if g.max_steps is not None and not _positive(g.max_steps):
            p.append("grpo.max_steps must be positive")
        for key in ("gradient_accumulation_steps", "lora_r", "lora_alpha", "rollout_attempts"):
            if not _positive(getattr(g, key)):
                p.append(f"grpo.{key} must be positive")
        if isinstance(g.lora_dropout, bool) or not isinstance(g.lora_dropout, (int, float)) or not 0 <= g.lora_dropout < 1:
            p.append("grpo.lora_dropout must be between 0 and 1")
        if g.generation_batch_size is not None and (
            not _positive(g.generation_batch_size) or g.generation_batch_size % r.num_generations
        ):
            p.append("grpo.generation_batch_size must be positive and divisible by runtime.num_generations")
        if isinstance(g.seed, bool) or not isinstance(g.seed, int) or g.seed < 0:
            p.append("grpo.seed must be a non-negative integer")
        if g.task_sampler not in {"trl", "cover"}:
            p.append("grpo.task_sampler must be trl or cover")
        if g.task_sampler == "cover":
            if g.max_steps is None:
                p.append("grpo.task_sampler = cover requires grpo.max_steps")
            if g.gradient_accumulation_steps != self.generation_batch:
                p.append(
                    "grpo.task_sampler = cover requires grpo.gradient_accumulation_steps to equal the "
                    f"generation batch size ({self.generation_batch}) so one optimizer step consumes exactly "
                    "one generation batch"
                )
        if g.rollout_failure_policy not in {"raise", "mask"}:
            p.append("grpo.rollout_failure_policy must be raise or mask")
        if not 0 <= g.max_masked_rollout_fraction < 1:
            p.append("grpo.max_masked_rollout_fraction must be in [0, 1)")
        return p

    def teacher_problems(self) -> list[str]:
        """`[teacher]`, `[sft]` and the task lists."""
        p: list[str] = []
        t, s = self.teacher, self.sft
        if not _positive(t.max_attempts) or not _positive(t.min_verified):
            p.append("teacher max_attempts and min_verified must be positive")
        if not isinstance(t.model, str) or "/" not in t.model:
            p.append("teacher.model must use provider/model format")
        if not 0 <= t.min_reward <= 1:
            p.append("teacher.min_reward must be between 0 and 1")
        if s.max_steps is not None and not _positive(s.max_steps):
            p.append("sft.max_steps must be positive")
        if not math.isfinite(float(s.num_train_epochs)) or s.num_train_epochs <= 0:
            p.append("sft.num_train_epochs must be positive")
        lists = [("train_dataset.task_list", self.train_dataset.task_list)]
        if self.eval_suites:
            lists += [(f"eval_suites.{x.name}.task_list", x.dataset.task_list) for x in self.eval_suites]
        else:
            lists.append(("eval_dataset.task_list", self.eval_dataset.task_list))
        for label, path in lists:
            if not path.is_file():
                p.append(f"{label} does not exist: {path}")
        if s.enabled and not t.enabled:
            p.append("sft.enabled requires teacher.enabled")
        return p


def _positive(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _table(data: dict, name: str, *, required: bool = False) -> dict:
    if required and name not in data:
        raise ValueError(f"Missing required [{name}] table")
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ValueError(f"[{name}] must be a TOML table")
    return value


def _resolve(base: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else (base / path).resolve()


def _dataset(base: Path, table: dict) -> DatasetConfig:
    return DatasetConfig(
        repo_id=str(table["repo_id"]),
        revision=str(table["revision"]),
        task_list=_resolve(base, str(table["task_list"])),
        path=str(table.get("path", "tasks")),
    )


def _suites(data: dict, base: Path) -> tuple:
    if "eval_suites" not in data:
        return ()
    if "eval_dataset" in data:
        raise ValueError("Use either [eval_dataset] or [[eval_suites]], not both")
    raw = data["eval_suites"]
    if not isinstance(raw, list) or not raw:
        raise ValueError("[[eval_suites]] must be a non-empty array of tables")
    out = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise ValueError(f"eval_suites[{i}] must be a TOML table")
        missing = [k for k in ("name", "repo_id", "revision", "task_list") if k not in entry]
        if missing:
            raise ValueError(f"eval_suites[{i}] is missing: " + ", ".join(missing))
        out.append(EvalSuite(str(entry["name"]), _dataset(base, entry)))
    return tuple(out)


def _tuple(table: dict, key: str, default: tuple) -> tuple:
    value = table.get(key, default)
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"harness.{key} must be a TOML array")
    return tuple(value)


def load_config(path: str | Path) -> PipelineConfig:
    source = Path(path).expanduser().resolve()
    data = tomllib.loads(source.read_text())
    base = source.parent
    model = _table(data, "model")
    suites = _suites(data, base)
    harness = _table(data, "harness", required=True)
    evaluation = _table(data, "evaluation", required=True)
    grpo = _table(data, "grpo")
    if isinstance(grpo.get("lora_target_parameters"), list):
        grpo = {**grpo, "lora_target_parameters": tuple(grpo["lora_target_parameters"])}
    config = PipelineConfig(
        source=source,
        model=str(model["id"]),
        model_revision=str(model["revision"]) if model.get("revision") else None,
        train_dataset=_dataset(base, _table(data, "train_dataset")),
        eval_dataset=suites[0].dataset if suites else _dataset(base, _table(data, "eval_dataset")),
        runtime=RuntimeConfig(**_table(data, "runtime")),
        harness=HarnessConfig(
            **{
                **harness,
                "external_directory_allow": _tuple(harness, "external_directory_allow", HarnessConfig.external_directory_allow),
                "deny_bash_patterns": _tuple(harness, "deny_bash_patterns", HarnessConfig.deny_bash_patterns),
            }
        ),
        evaluation=EvaluationConfig(**evaluation),
        teacher=TeacherConfig(**_table(data, "teacher")),
        sft=SftConfig(**_table(data, "sft")),
        grpo=GrpoConfig(**grpo),
        tracking=TrackingConfig(**_table(data, "tracking")),
        output_root=_resolve(base, str(_table(data, "output").get("root", "../runs"))),
        eval_suites=suites,
    )
    problems = config.problems()
    if problems:
        raise ValueError("Invalid pipeline config:\n- " + "\n- ".join(problems))
    return config


def read_task_ids(path: Path) -> list[str]:
    """One id a line; blank lines and `#` comments skipped; duplicates dropped, order kept."""
    seen: list[str] = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and line not in seen:
            seen.append(line)
    return seen


def plan_view(config: PipelineConfig) -> dict[str, Any]:
    """The config tables as `plan.json` and `score.json` record them."""
    from dataclasses import asdict

    def plain(v: Any) -> Any:
        if isinstance(v, Path):
            return str(v)
        if isinstance(v, tuple):
            return list(v)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    return {
        name: plain(asdict(getattr(config, name)))
        for name in ("runtime", "harness", "evaluation", "teacher", "sft", "grpo", "tracking")
    }
