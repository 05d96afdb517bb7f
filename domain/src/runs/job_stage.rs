//! An HF job's `status.stage`, as HF spells it. HF may add stages; one the arena does not know is
//! kept as HF wrote it (`Other`) and treated as neither running nor ended.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum JobStage {
    Scheduling,
    Updating,
    Running,
    Completed,
    Canceled,
    Error,
    Deleted,
    Other(String),
}

const KNOWN: [(JobStage, &str); 7] = [
    (JobStage::Scheduling, "SCHEDULING"),
    (JobStage::Updating, "UPDATING"),
    (JobStage::Running, "RUNNING"),
    (JobStage::Completed, "COMPLETED"),
    (JobStage::Canceled, "CANCELED"),
    (JobStage::Error, "ERROR"),
    (JobStage::Deleted, "DELETED"),
];

impl JobStage {
    pub fn as_str(&self) -> &str {
        match self {
            JobStage::Other(s) => s,
            known => KNOWN.iter().find(|(k, _)| k == known).map(|(_, s)| *s).unwrap_or_default(),
        }
    }

    /// HF will not run the job again: it completed, failed, was canceled or deleted.
    pub fn has_ended(&self) -> bool {
        matches!(self, JobStage::Completed | JobStage::Canceled | JobStage::Error | JobStage::Deleted)
    }

    /// Waiting for hardware before it runs.
    pub fn is_waiting(&self) -> bool {
        matches!(self, JobStage::Scheduling)
    }

    /// Its container runs: `RUNNING`, or `UPDATING` (a change to a running job's spec), which
    /// `huggingface_hub` counts as active like `RUNNING` (`hf jobs ps`).
    pub fn is_active(&self) -> bool {
        matches!(self, JobStage::Running | JobStage::Updating)
    }

    /// Scheduled or running: HF may still bill it, so the arena stops it when it is not needed.
    pub fn is_live(&self) -> bool {
        self.is_waiting() || self.is_active()
    }
}

impl From<String> for JobStage {
    fn from(s: String) -> JobStage {
        KNOWN.iter().find(|(_, k)| *k == s).map(|(stage, _)| stage.clone()).unwrap_or(JobStage::Other(s))
    }
}

impl From<&str> for JobStage {
    fn from(s: &str) -> JobStage {
        JobStage::from(s.to_string())
    }
}

impl From<JobStage> for String {
    fn from(stage: JobStage) -> String {
        stage.as_str().to_string()
    }
}

impl PartialEq<&str> for JobStage {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for JobStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_read_and_write_as_hf_spells_them() {
        for (stage, text) in KNOWN {
            assert_eq!(JobStage::from(text), stage);
            assert_eq!(stage.as_str(), text);
            assert_eq!(serde_json::to_string(&stage).unwrap(), format!("\"{text}\""));
        }
        let new: JobStage = serde_json::from_str("\"PAUSED\"").unwrap();
        assert_eq!(new, JobStage::Other("PAUSED".into()));
        assert!(!new.has_ended() && !new.is_waiting() && !new.is_active());
        assert!(JobStage::Error.has_ended() && JobStage::Scheduling.is_waiting());
        // UPDATING is active like RUNNING, never "still scheduling".
        assert!(JobStage::Updating.is_active() && !JobStage::Updating.is_waiting());
        assert!(JobStage::Updating.is_live() && !JobStage::Completed.is_live());
    }
}
