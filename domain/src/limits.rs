//! Sliding-window limits held in memory: at most `cap` events per window for each key (a client
//! address, say), with the number of keys bounded so that a flood of new keys costs no memory.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// At most `cap` events in any `window_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub cap: usize,
    pub window_ms: u64,
}

/// The events of each key within its window.
#[derive(Debug)]
pub struct Windows<K> {
    window: Window,
    max_keys: usize,
    events: HashMap<K, VecDeque<u64>>,
}

impl<K: Eq + Hash + Clone> Windows<K> {
    pub fn new(window: Window, max_keys: usize) -> Windows<K> {
        Windows { window, max_keys: max_keys.max(1), events: HashMap::new() }
    }

    /// Whether one more event for `key` fits at `now_ms`; if not, how many ms until it does.
    pub fn check(&mut self, key: &K, now_ms: u64) -> Result<(), u64> {
        let w = self.window;
        let Some(times) = self.events.get_mut(key) else {
            if self.events.len() >= self.max_keys {
                self.forget_idle(now_ms);
                if self.events.len() >= self.max_keys {
                    // Every kept key is busy: a new one waits for the oldest window to pass.
                    let oldest =
                        self.events.values().filter_map(|t| t.front()).min().copied().unwrap_or(now_ms);
                    return Err((oldest + w.window_ms).saturating_sub(now_ms).max(1));
                }
            }
            return if w.cap == 0 { Err(w.window_ms) } else { Ok(()) };
        };
        while times.front().is_some_and(|t| now_ms.saturating_sub(*t) >= w.window_ms) {
            times.pop_front();
        }
        if times.len() < w.cap {
            return Ok(());
        }
        let first = times.front().copied().unwrap_or(now_ms);
        Err((first + w.window_ms).saturating_sub(now_ms).max(1))
    }

    /// Counts an event for `key` at `now_ms` (after `check` said it fits).
    pub fn record(&mut self, key: &K, now_ms: u64) {
        self.events.entry(key.clone()).or_default().push_back(now_ms);
    }

    /// Counts an event if it fits; otherwise answers how many ms until it does.
    pub fn admit(&mut self, key: &K, now_ms: u64) -> Result<(), u64> {
        self.check(key, now_ms)?;
        self.record(key, now_ms);
        Ok(())
    }

    /// Keys kept now.
    pub fn keys(&self) -> usize {
        self.events.len()
    }

    fn forget_idle(&mut self, now_ms: u64) {
        let window = self.window.window_ms;
        self.events.retain(|_, t| t.back().is_some_and(|last| now_ms.saturating_sub(*last) < window));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gets_cap_events_per_window_and_is_told_when_the_next_fits() {
        let mut w = Windows::new(Window { cap: 3, window_ms: 1000 }, 10);
        for t in [0, 100, 200] {
            assert_eq!(w.admit(&"a", t), Ok(()));
        }
        assert_eq!(w.admit(&"a", 300), Err(700), "the first event leaves the window at 1000");
        assert_eq!(w.admit(&"b", 300), Ok(()), "another key has its own window");
        assert_eq!(w.admit(&"a", 1000), Ok(()));
        assert_eq!(w.admit(&"a", 1001), Err(99));
    }

    #[test]
    fn new_keys_past_the_bound_wait_unless_idle_keys_can_be_forgotten() {
        let mut w = Windows::new(Window { cap: 1, window_ms: 1000 }, 2);
        assert_eq!(w.admit(&1, 0), Ok(()));
        assert_eq!(w.admit(&2, 500), Ok(()));
        assert_eq!(w.admit(&3, 600), Err(400), "both kept keys are busy");
        assert_eq!(w.keys(), 2);
        assert_eq!(w.admit(&3, 1200), Ok(()), "key 1 went idle and was forgotten");
        assert_eq!(w.keys(), 2);
    }
}
