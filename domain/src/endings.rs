//! How a run ended, one type for both tracks. Every terminal write of a run (a collection's run or
//! baseline, an OpenEnv run) also writes an ending in the same transaction, and one pass turns
//! endings into notifications (`webhooks`). The wire words stay each track's own, as the guide
//! spells them: a collection run is `scored` or `canceled`, an OpenEnv run `completed` or
//! `cancelled`.

use serde::{Deserialize, Serialize};

/// The track a run belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Track {
    Collection,
    Openenv,
}

impl Track {
    pub fn as_str(self) -> &'static str {
        match self {
            Track::Collection => "collection",
            Track::Openenv => "openenv",
        }
    }

    pub fn parse(s: &str) -> Option<Track> {
        [Track::Collection, Track::Openenv].into_iter().find(|t| t.as_str() == s)
    }
}

/// How a run ended, whichever its track.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It did what it was for: scored (a collection's run) or completed (an OpenEnv run).
    Succeeded,
    Failed,
    /// An organizer (or its author) stopped it.
    Canceled,
}

impl Ending {
    /// The state's word on the track's wire.
    pub fn wire(self, track: Track) -> &'static str {
        match (self, track) {
            (Ending::Succeeded, Track::Collection) => "scored",
            (Ending::Succeeded, Track::Openenv) => "completed",
            (Ending::Failed, _) => "failed",
            (Ending::Canceled, Track::Collection) => "canceled",
            (Ending::Canceled, Track::Openenv) => "cancelled",
        }
    }

    /// The ending a track's wire word names (`None`: not an ending).
    pub fn from_wire(track: Track, word: &str) -> Option<Ending> {
        [Ending::Succeeded, Ending::Failed, Ending::Canceled].into_iter().find(|e| e.wire(track) == word)
    }
}

impl crate::runs::RunState {
    /// How a collection run in this state ended; `None` while it has not.
    pub fn ending(self) -> Option<Ending> {
        Ending::from_wire(Track::Collection, self.as_str())
    }
}

impl crate::openenv::run::RunState {
    /// How an OpenEnv run in this state ended; `None` while it has not.
    pub fn ending(self) -> Option<Ending> {
        Ending::from_wire(Track::Openenv, self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_ending_type_the_wire_words_each_tracks_own() {
        use crate::openenv::run::RunState as OpenEnv;
        use crate::runs::RunState as Collection;
        assert_eq!(Collection::Canceled.ending(), Some(Ending::Canceled));
        assert_eq!(OpenEnv::Cancelled.ending(), Some(Ending::Canceled));
        assert_eq!(Collection::Scored.ending(), Some(Ending::Succeeded));
        assert_eq!(OpenEnv::Completed.ending(), Some(Ending::Succeeded));
        assert_eq!((Collection::Running.ending(), OpenEnv::Rolling.ending()), (None, None));
        for state in [
            Collection::Queued,
            Collection::Running,
            Collection::Scored,
            Collection::Failed,
            Collection::Canceled,
        ] {
            assert_eq!(state.ending().is_some(), state.has_ended(), "{state:?}");
        }
        assert_eq!(Ending::Canceled.wire(Track::Openenv), "cancelled");
        assert_eq!(Ending::from_wire(Track::Collection, "cancelled"), None);
    }
}
