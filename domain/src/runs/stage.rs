//! The guide's coarse stages of a run, in the order a run goes through them: `setup` (the job
//! starts the model server and connects), `snapshot`, `baseline`, `gate`, `training`, `heldout`,
//! `collect`. Ordered, so the furthest of two sources is their maximum; spelled as the guide
//! spells them wherever they are shown or stored.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    Setup,
    Snapshot,
    Baseline,
    Gate,
    Training,
    Heldout,
    Collect,
}

impl Stage {
    pub const ALL: [Stage; 7] = [
        Stage::Setup,
        Stage::Snapshot,
        Stage::Baseline,
        Stage::Gate,
        Stage::Training,
        Stage::Heldout,
        Stage::Collect,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Setup => "setup",
            Stage::Snapshot => "snapshot",
            Stage::Baseline => "baseline",
            Stage::Gate => "gate",
            Stage::Training => "training",
            Stage::Heldout => "heldout",
            Stage::Collect => "collect",
        }
    }

    pub fn parse(s: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|stage| stage.as_str() == s)
    }

    /// Its place in the order, from 0.
    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(feature = "sqlx")]
crate::text_column!(Stage, "stage");

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Stage {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_are_in_the_guides_order_and_spelling() {
        let names: Vec<&str> = Stage::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names, ["setup", "snapshot", "baseline", "gate", "training", "heldout", "collect"]);
        for (i, s) in Stage::ALL.into_iter().enumerate() {
            assert_eq!(Stage::parse(s.as_str()), Some(s));
            assert_eq!(s.index(), i);
        }
        assert!(Stage::Heldout > Stage::Training);
        assert_eq!(Stage::parse("Setup"), None);
    }
}
