//! The OpenEnv leaderboard by participant: one row per HF account, its best result across its
//! submissions (the submission row with the highest Δ, its interval with it) and its best Δ per
//! domain across them, ranked and tie-grouped as the submissions' board is. Read in pages from a
//! snapshot frozen when the first page was read, so paging never skips or repeats a row while new
//! runs complete.

use serde::{Deserialize, Serialize};

use super::evaluation::{DomainDelta, LeaderboardRow};

/// One account's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvAccountRow))]
pub struct AccountRow {
    pub rank: u32,
    pub tie_group: u32,
    pub account: String,
    /// Its best submission: the one its Δ, interval and runs are from.
    pub submission_id: String,
    pub name: String,
    pub delta_pp: f64,
    pub stderr_pp: Option<f64>,
    pub ci95_pp: Option<[f64; 2]>,
    pub runs: u32,
    /// Its submissions on the board.
    pub submissions: u32,
    /// Its best Δ per domain, across all its submissions (null where none paired a task of it).
    pub domains: Vec<DomainDelta>,
    pub simulated: bool,
}

/// `GET /api/openenv/leaderboard?by=account`: one page of a frozen snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvAccountBoard))]
pub struct AccountPage {
    /// `account`.
    pub by: String,
    pub benchmark: Option<String>,
    pub domains: Vec<String>,
    /// When the snapshot this page is read from was taken.
    pub snapshot_at: String,
    /// Rows in the snapshot.
    pub total: u32,
    pub rows: Vec<AccountRow>,
    /// The next page (same snapshot); null on the last.
    pub next_cursor: Option<String>,
    /// The signed-in caller's own row, pinned whatever page this is (null: not signed in or not on
    /// the board).
    pub me: Option<AccountRow>,
}

/// Rows a page holds at most, and by default.
pub const MAX_PAGE: u32 = 100;
pub const DEFAULT_PAGE: u32 = 25;

/// The accounts' rows from the submissions' (already ranked) rows.
pub fn by_account(rows: &[LeaderboardRow]) -> Vec<AccountRow> {
    let mut accounts: Vec<&str> = Vec::new();
    for r in rows {
        if !accounts.contains(&r.account.as_str()) {
            accounts.push(&r.account);
        }
    }
    let mut out: Vec<AccountRow> = accounts
        .into_iter()
        .filter_map(|account| {
            let mine: Vec<&LeaderboardRow> = rows.iter().filter(|r| r.account == account).collect();
            // Rows come best first: the account's first is its best.
            let best = mine.first()?;
            let domains = best
                .domains
                .iter()
                .map(|d| DomainDelta {
                    domain: d.domain.clone(),
                    delta_pp: mine
                        .iter()
                        .filter_map(|r| r.domains.iter().find(|x| x.domain == d.domain)?.delta_pp)
                        .max_by(f64::total_cmp),
                })
                .collect();
            Some(AccountRow {
                rank: 0,
                tie_group: 0,
                account: account.to_string(),
                submission_id: best.submission_id.clone(),
                name: best.name.clone(),
                delta_pp: best.delta_pp,
                stderr_pp: best.stderr_pp,
                ci95_pp: best.ci95_pp,
                runs: best.runs,
                submissions: mine.len() as u32,
                domains,
                simulated: mine.iter().any(|r| r.simulated),
            })
        })
        .collect();
    out.sort_by(|a, b| b.delta_pp.total_cmp(&a.delta_pp).then_with(|| a.account.cmp(&b.account)));
    let (mut group, mut head, mut rank, mut last) = (0, None, 0, None);
    for (i, row) in out.iter_mut().enumerate() {
        let me = (row.delta_pp, row.stderr_pp);
        if !head.is_some_and(|h| crate::results::tied_with_leader(me, h)) {
            group += 1;
            head = Some(me);
        }
        // Equal Δ to a hundredth of a point shares a rank.
        let hundredths = (row.delta_pp * 100.0).round() as i64;
        if last != Some(hundredths) {
            rank = i as u32 + 1;
            last = Some(hundredths);
        }
        row.rank = rank;
        row.tie_group = group;
    }
    out
}

/// A page cursor: the snapshot and the offset of the page's first row.
pub fn cursor(snapshot: &str, offset: u32) -> String {
    format!("{snapshot}.{offset}")
}

/// A cursor read back: (snapshot, offset); `None` for anything else.
pub fn parse_cursor(text: &str) -> Option<(&str, u32)> {
    let (snapshot, offset) = text.rsplit_once('.')?;
    // As the route's pattern says: 8 to 64 hex digits, a dot, 1 to 9 decimal digits (no sign).
    let ok = (8..=64).contains(&snapshot.len())
        && snapshot.bytes().all(|b| b.is_ascii_hexdigit())
        && (1..=9).contains(&offset.len())
        && offset.bytes().all(|b| b.is_ascii_digit());
    ok.then_some(())?;
    Some((snapshot, offset.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(account: &str, sub: &str, delta: f64, se: f64, domain: f64) -> LeaderboardRow {
        LeaderboardRow {
            rank: 0,
            tie_group: 0,
            account: account.into(),
            submission_id: sub.into(),
            name: sub.into(),
            delta_pp: delta,
            stderr_pp: Some(se),
            ci95_pp: Some([delta - 1.96 * se, delta + 1.96 * se]),
            runs: 1,
            run_ids: vec![],
            domains: vec![DomainDelta { domain: "words".into(), delta_pp: Some(domain) }],
            simulated: false,
        }
    }

    #[test]
    fn one_row_per_account_its_best_overall_and_per_domain() {
        let rows = [
            row("alice", "a1", 9.0, 1.0, 2.0),
            row("bob", "b1", 8.9, 1.0, 1.0),
            row("alice", "a2", 3.0, 1.0, 12.0),
            row("carol", "c1", -5.0, 0.5, -1.0),
        ];
        let accounts = by_account(&rows);
        let names: Vec<&str> = accounts.iter().map(|r| r.account.as_str()).collect();
        assert_eq!(names, ["alice", "bob", "carol"]);
        assert_eq!((accounts[0].submission_id.as_str(), accounts[0].submissions), ("a1", 2));
        assert_eq!(
            accounts[0].domains[0].delta_pp,
            Some(12.0),
            "its best per domain, from another submission"
        );
        assert_eq!(
            (accounts[1].tie_group, accounts[2].tie_group),
            (1, 2),
            "bob overlaps alice; carol does not"
        );
        assert_eq!(accounts.iter().map(|r| r.rank).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(parse_cursor(&cursor("00ff00ff00ff", 25)), Some(("00ff00ff00ff", 25)));
        assert_eq!(parse_cursor("nothex.3"), None);
        assert_eq!(parse_cursor("00ff00ff00ff"), None);
        assert_eq!(parse_cursor("00ff00ff00ff.+3"), None, "the pattern's digits only");
        assert_eq!(parse_cursor("00ff00ff00ff.1234567890"), None);
    }
}
