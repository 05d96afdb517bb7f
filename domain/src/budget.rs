//! The shared compute cap and its reservation ledger. Amounts are whole cents so that sums are
//! exact; the wire form is dollars.

pub use crate::money::{cents_ceil, dollars};
use crate::views::BudgetView;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerState {
    /// Reserved before a job starts: flavor price × hard timeout.
    Live,
    /// Replaced by what HF billed once the run finished.
    Settled,
    /// Given back without spending (the launch never happened).
    Released,
}

impl LedgerState {
    pub fn as_str(self) -> &'static str {
        match self {
            LedgerState::Live => "live",
            LedgerState::Settled => "settled",
            LedgerState::Released => "released",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "live" => Some(LedgerState::Live),
            "settled" => Some(LedgerState::Settled),
            "released" => Some(LedgerState::Released),
            _ => None,
        }
    }
}

#[cfg(feature = "sqlx")]
crate::text_column!(LedgerState, "ledger state");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerEntry {
    pub amount_cents: i64,
    pub state: LedgerState,
}

/// Committed spend is the larger of the ledger and HF's records plus live reservations, so the
/// dashboard, `budget`, `health` and the launch guard all show one number.
pub fn summarize(cap_cents: i64, entries: &[LedgerEntry], hf_recorded_cents: Option<i64>) -> BudgetView {
    let live: i64 = entries.iter().filter(|e| e.state == LedgerState::Live).map(|e| e.amount_cents).sum();
    let settled: i64 =
        entries.iter().filter(|e| e.state == LedgerState::Settled).map(|e| e.amount_cents).sum();
    let live_count = entries.iter().filter(|e| e.state == LedgerState::Live).count() as u64;
    let ledger = live + settled;
    let committed = hf_recorded_cents.map_or(ledger, |hf| ledger.max(hf + live));
    BudgetView {
        cap_usd: dollars(cap_cents),
        committed_usd: dollars(committed),
        remaining_usd: dollars((cap_cents - committed).max(0)),
        ledger_usd: dollars(ledger),
        live_reservations_usd: dollars(live),
        live_reservations: live_count,
        hf_recorded_usd: hf_recorded_cents.map(dollars),
    }
}

/// HF's surcharge for a job that exposes ports, per hour while it starts or runs (HF's pricing
/// page: $0.01/h).
pub const EXPOSED_PORTS_USD_PER_HOUR: f64 = 0.01;

/// A job's price per hour: its flavor's, plus the exposed-port surcharge when it exposes any.
pub fn job_hourly_usd(flavor_usd_per_hour: f64, exposes_ports: bool) -> f64 {
    flavor_usd_per_hour + if exposes_ports { EXPOSED_PORTS_USD_PER_HOUR } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(amount_cents: i64, state: LedgerState) -> LedgerEntry {
        LedgerEntry { amount_cents, state }
    }

    #[test]
    fn empty_ledger_leaves_the_whole_cap() {
        let b = summarize(500_000, &[], None);
        assert_eq!((b.cap_usd, b.committed_usd, b.remaining_usd), (5000.0, 0.0, 5000.0));
        assert_eq!(b.live_reservations, 0);
        assert_eq!(b.hf_recorded_usd, None);
    }

    #[test]
    fn committed_counts_live_and_settled_but_not_released() {
        let b = summarize(
            100_000,
            &[
                entry(30_000, LedgerState::Live),
                entry(12_345, LedgerState::Settled),
                entry(99_999, LedgerState::Released),
            ],
            None,
        );
        assert_eq!(b.committed_usd, 423.45);
        assert_eq!(b.remaining_usd, 576.55);
        assert_eq!(b.live_reservations_usd, 300.0);
        assert_eq!(b.live_reservations, 1);
    }

    #[test]
    fn hf_records_win_when_they_exceed_the_ledger() {
        let entries = [entry(10_000, LedgerState::Live), entry(5_000, LedgerState::Settled)];
        // HF billed 200 for finished jobs: 200 + 100 live > ledger 150.
        assert_eq!(summarize(100_000, &entries, Some(20_000)).committed_usd, 300.0);
        // HF billed less than the ledger: the ledger stands.
        assert_eq!(summarize(100_000, &entries, Some(1_000)).committed_usd, 150.0);
    }

    #[test]
    fn remaining_never_goes_negative() {
        let b = summarize(1_000, &[entry(5_000, LedgerState::Settled)], None);
        assert_eq!(b.remaining_usd, 0.0);
    }

    #[test]
    fn cents_round_up() {
        assert_eq!(cents_ceil(1.001), 101);
        assert_eq!(cents_ceil(1.0), 100);
        assert_eq!(cents_ceil(0.0), 0);
    }

    #[test]
    fn states_round_trip() {
        for s in [LedgerState::Live, LedgerState::Settled, LedgerState::Released] {
            assert_eq!(LedgerState::parse(s.as_str()), Some(s));
        }
        assert_eq!(LedgerState::parse("pending"), None);
    }
}
