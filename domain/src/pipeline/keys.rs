//! The pipeline's config loader as `reference/pipeline.md` §4 quotes it (Branch H, `config.py` at
//! 2c37dc0): the tables it reads and, for its typed tables, every key and its kind. A typed table
//! holding any other key is refused by the loader (`TypeError: …unexpected keyword argument`);
//! the other tables' unknown keys are ignored, so the arena writes none there either. The tests
//! check every key the arena composes against this table.

/// A key's TOML type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Str,
    Int,
    /// A float; an integer is accepted where the loader compares numbers.
    Float,
    Bool,
    StrArray,
}

#[derive(Debug, Clone, Copy)]
pub struct Table {
    pub name: &'static str,
    /// Read into a dataclass: an unknown key is an error.
    pub typed: bool,
    /// `Missing required [{name}] table` without it.
    pub required: bool,
    /// An array of tables (`[[eval_suites]]`).
    pub array: bool,
    pub keys: &'static [(&'static str, Kind)],
}

use Kind::*;

pub const TABLES: &[Table] = &[
    Table {
        name: "model",
        typed: false,
        required: false,
        array: false,
        keys: &[("id", Str), ("revision", Str)],
    },
    Table {
        name: "train_dataset",
        typed: false,
        required: false,
        array: false,
        keys: &[("repo_id", Str), ("revision", Str), ("task_list", Str), ("path", Str)],
    },
    Table {
        name: "eval_suites",
        typed: false,
        required: false,
        array: true,
        keys: &[("name", Str), ("repo_id", Str), ("revision", Str), ("task_list", Str), ("path", Str)],
    },
    Table {
        name: "runtime",
        typed: true,
        required: false,
        array: false,
        keys: &[
            ("sandbox", Str),
            ("sandbox_user", Str),
            ("max_completion_length", Int),
            ("num_generations", Int),
        ],
    },
    Table {
        name: "harness",
        typed: true,
        required: true,
        array: false,
        keys: &[
            ("agent", Str),
            ("skill_mode", Str),
            ("usage_tracking", Str),
            ("external_directory_allow", StrArray),
            ("deny_bash_patterns", StrArray),
            ("concurrency", Int),
            ("sandbox_setup_timeout_sec", Int),
            ("agent_idle_timeout_sec", Int),
            ("agent_timeout_sec", Int),
            ("reasoning_effort", Str),
            ("max_infra_error_fraction", Float),
        ],
    },
    Table {
        name: "evaluation",
        typed: true,
        required: true,
        array: false,
        keys: &[
            ("base_model_env", Str),
            ("student_model_env", Str),
            ("base_url_env", Str),
            ("control_url_env", Str),
            ("api_key_env", Str),
            ("sync_base_to_vllm", Bool),
            ("trials", Int),
        ],
    },
    Table {
        name: "teacher",
        typed: true,
        required: false,
        array: false,
        keys: &[
            ("enabled", Bool),
            ("model", Str),
            ("source_model", Str),
            ("source_revision", Str),
            ("max_attempts", Int),
            ("min_verified", Int),
            ("require_all_tasks", Bool),
            ("min_reward", Float),
            ("max_accepted_total_tokens", Int),
            ("max_accepted_tool_calls", Int),
        ],
    },
    Table {
        name: "sft",
        typed: true,
        required: false,
        array: false,
        keys: &[
            ("enabled", Bool),
            ("num_train_epochs", Float),
            ("max_steps", Int),
            ("learning_rate", Float),
            ("max_length", Int),
            ("gradient_accumulation_steps", Int),
            ("gradient_checkpointing", Bool),
            ("lora_r", Int),
            ("lora_alpha", Int),
            ("lora_dropout", Float),
        ],
    },
    Table {
        name: "grpo",
        typed: true,
        required: false,
        array: false,
        keys: &[
            ("enabled", Bool),
            ("run_policy", Str),
            ("threshold", Float),
            ("gate_task_count", Int),
            ("num_train_epochs", Float),
            ("max_steps", Int),
            ("learning_rate", Float),
            ("gradient_accumulation_steps", Int),
            ("gradient_checkpointing", Bool),
            ("lora_r", Int),
            ("lora_alpha", Int),
            ("lora_dropout", Float),
            ("log_completions", Bool),
            ("generation_batch_size", Int),
            ("rollout_attempts", Int),
            ("require_reward_variance", Bool),
            ("vllm_server_base_url_env", Str),
            ("seed", Int),
            ("task_sampler", Str),
            ("require_full_coverage", Bool),
            ("rollout_failure_policy", Str),
            ("max_masked_rollout_fraction", Float),
            ("lora_target_parameters", StrArray),
        ],
    },
    Table {
        name: "tracking",
        typed: true,
        required: false,
        array: false,
        keys: &[("report_to", Str), ("project", Str)],
    },
    Table { name: "output", typed: false, required: false, array: false, keys: &[("root", Str)] },
];

fn kind_of(value: &toml::Value) -> Option<Kind> {
    Some(match value {
        toml::Value::String(_) => Str,
        toml::Value::Integer(_) => Int,
        toml::Value::Float(_) => Float,
        toml::Value::Boolean(_) => Bool,
        toml::Value::Array(items) if items.iter().all(|i| i.is_str()) => StrArray,
        _ => return None,
    })
}

fn check_table(table: &Table, label: &str, value: &toml::Value, problems: &mut Vec<String>) {
    let Some(entries) = value.as_table() else {
        problems.push(format!("[{label}] must be a TOML table"));
        return;
    };
    for (key, v) in entries {
        match table.keys.iter().find(|(k, _)| k == key) {
            None => problems.push(format!("{label}.{key} is not a key the pipeline reads")),
            Some((_, want)) => {
                let ok = match (want, kind_of(v)) {
                    (Float, Some(Int)) => true,
                    (want, got) => got == Some(*want),
                };
                if !ok {
                    problems.push(format!("{label}.{key} must be a {want:?}"));
                }
            }
        }
    }
}

/// What in a composed config the loader would refuse or ignore: unknown tables, unknown keys,
/// wrong kinds, missing required tables. Empty when the config is what the loader reads.
pub fn check(config: &toml::Table) -> Vec<String> {
    let mut problems = Vec::new();
    for table in TABLES.iter().filter(|t| t.required) {
        if !config.contains_key(table.name) {
            problems.push(format!("Missing required [{}] table", table.name));
        }
    }
    for (name, value) in config {
        let Some(table) = TABLES.iter().find(|t| t.name == name) else {
            problems.push(format!("[{name}] is not a table the pipeline reads"));
            continue;
        };
        if table.array {
            match value.as_array() {
                Some(items) if !items.is_empty() => {
                    for (i, item) in items.iter().enumerate() {
                        check_table(table, &format!("{name}[{i}]"), item, &mut problems);
                    }
                }
                _ => problems.push(format!("[[{name}]] must be a non-empty array of tables")),
            }
        } else {
            check_table(table, name, value, &mut problems);
        }
    }
    problems
}
