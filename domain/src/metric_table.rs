//! The trainers' per-step numbers, each under the one name TRL's `grpo_trainer.py` (or the
//! OpenEnv trainer, for its own) logs it: one table per track makes the struct, its list of names
//! and its reader, so a metric keeps its name from the trainer through the relay and the database
//! to the API and the page. `tests/fixtures/metric-names.json` carries the lists to the Python
//! side (`metric_names_fixture`). Names runs were stored under before (`reward_mean`,
//! `completion_length`, …) are still read.

/// `metric_table! { struct Name { field: "logged/name" or "old_name", … } }`.
macro_rules! metric_table {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            // Names as token trees, not `literal`s: a `literal` reaches the derives wrapped in an
            // invisible group, which utoipa's reader of `serde(rename)` does not see through.
            $( $(#[$doc:meta])* $field:ident: $key:tt $(or $old:tt)*, )*
        }
    ) => {
        // The derive first: the attributes given may be its helpers (`serde`, `schema`).
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        $(#[$meta])*
        pub struct $name {
            $( $(#[$doc])* #[serde(default, rename = $key $(, alias = $old)*)] pub $field: Option<f64>, )*
        }

        impl $name {
            /// Every metric's name as it is logged, in the table's order.
            pub const NAMES: &'static [&'static str] = &[$($key),*];

            /// Each metric with its name.
            pub fn values(&self) -> Vec<(&'static str, Option<f64>)> {
                vec![$(($key, self.$field)),*]
            }

            /// Reads logged pairs by name; another name, or a value that is not finite, is left out.
            pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, f64)>) -> $name {
                let mut m = $name::default();
                for (key, value) in pairs.into_iter().filter(|(_, v)| v.is_finite()) {
                    match key {
                        $($key => m.$field = Some(value),)*
                        _ => {}
                    }
                }
                m
            }

            /// Refuses what a trainer could send that is not a measurement: a value that is not finite.
            pub fn check(&self) -> Result<(), $crate::invalid::Invalid> {
                match self.values().iter().any(|(_, v)| v.is_some_and(|v| !v.is_finite())) {
                    true => Err("a training metric that is not a finite number".into()),
                    false => Ok(()),
                }
            }

            pub fn is_empty(&self) -> bool {
                self.values().iter().all(|(_, v)| v.is_none())
            }
        }
    };
}

pub(crate) use metric_table;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::openenv::run::StepMetrics;
    use crate::training::TrainMetrics;

    const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/metric-names.json");

    /// The lists the trainers' Python keeps (`public/arena_job.py`'s `TRL_METRICS`,
    /// `cluster/arena_cluster/trainer.py`'s `METRICS`), checked there against this file. The test
    /// fails when the file differs from the tables; `ARENA_WRITE_FIXTURES=1` writes it again.
    #[test]
    fn metric_names_fixture() {
        let now = serde_json::to_string_pretty(&json!({
            "collection": TrainMetrics::NAMES,
            "openenv": StepMetrics::NAMES,
        }))
        .unwrap()
            + "\n";
        if std::env::var_os("ARENA_WRITE_FIXTURES").is_some() {
            std::fs::write(FIXTURE, &now).unwrap();
        }
        let written = std::fs::read_to_string(FIXTURE).unwrap_or_default();
        assert!(
            written == now,
            "{FIXTURE} is not what the metric tables say now: run `ARENA_WRITE_FIXTURES=1 cargo test -p domain --lib metric_names_fixture`, then commit it"
        );
    }

    #[test]
    fn a_metric_keeps_its_logged_name_and_old_names_still_read() {
        let m: TrainMetrics =
            serde_json::from_value(json!({"completion_length": 12.0, "reward": 0.5})).unwrap();
        assert_eq!((m.completions_mean_length, m.reward), (Some(12.0), Some(0.5)));
        let out = serde_json::to_value(&m).unwrap();
        assert_eq!(out["completions/mean_length"], 12.0, "{out}");
        assert!(out.get("completion_length").is_none(), "{out}");
        let s: StepMetrics =
            serde_json::from_value(json!({"reward_mean": 0.25, "completion_tokens": 40.0, "step_s": 3.0}))
                .unwrap();
        assert_eq!(
            (s.reward, s.completions_mean_length, s.episodes_step_s),
            (Some(0.25), Some(40.0), Some(3.0))
        );
        assert_eq!(serde_json::to_value(&s).unwrap()["episodes/step_s"], 3.0);
        assert_eq!(
            TrainMetrics::from_pairs([("completions/mean_length", 9.0), ("loss", f64::NAN)])
                .completions_mean_length,
            Some(9.0)
        );
    }
}
