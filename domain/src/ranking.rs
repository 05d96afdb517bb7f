//! The leaderboard's ranking: a row per collection on the mean Δ of its accepted runs, with the
//! pooled standard error, and when a row is tied with the leader. Pure arithmetic, shared by the
//! collection track (`results`) and the OpenEnv track (`openenv::evaluation`).

use std::collections::BTreeMap;

/// An accepted (or rejected) run of a collection, as the leaderboard reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedRun {
    pub environment_id: String,
    pub run_id: String,
    pub accepted: bool,
    /// The run's Δ and its own evaluation standard error (pp), on what is ranked; the error is
    /// null for a run with one paired task.
    pub delta_pp: f64,
    pub stderr_pp: Option<f64>,
    /// Order of review: the latest accepted run gives the row's other fields.
    pub order: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub environment_id: String,
    pub rank: u32,
    pub delta_pp: f64,
    pub stderr_pp: Option<f64>,
    pub verified_runs: u32,
    pub rejected_runs: u32,
    pub run_deltas_pp: Vec<f64>,
    pub run_ids: Vec<String>,
    pub latest_run_id: String,
}

/// Δ as shown and compared for ties: to a hundredth of a point.
pub fn shown(pp: f64) -> f64 {
    (pp * 100.0).round() / 100.0
}

/// The board: each collection on the mean Δ of its accepted runs. Its standard error is
/// sqrt(v / n), v the run-to-run variance pooled over every collection with two or more accepted
/// runs, never less than a run's own evaluation variance (the row's mean of its runs' squared
/// standard errors); before any collection has repeat runs, v is that evaluation variance, so a
/// single run keeps its own standard error. A run with no standard error (one paired task) adds
/// no evaluation variance; a row none of whose runs has one, before any repeat exists anywhere,
/// has no standard error either, and is still ranked by its Δ. Ties (equal Δ as shown) share a
/// rank. Answers the rows and the pooled per-run standard deviation.
pub fn rank(runs: &[RankedRun]) -> (Vec<Row>, Option<f64>) {
    let mut by_env: BTreeMap<&str, Vec<&RankedRun>> = BTreeMap::new();
    for r in runs {
        by_env.entry(r.environment_id.as_str()).or_default().push(r);
    }
    // Pooled within-collection variance over collections with repeats.
    let (mut ss, mut dof) = (0.0, 0usize);
    for rs in by_env.values() {
        let d: Vec<f64> = rs.iter().filter(|r| r.accepted).map(|r| r.delta_pp).collect();
        if d.len() >= 2 {
            let m = d.iter().sum::<f64>() / d.len() as f64;
            ss += d.iter().map(|x| (x - m).powi(2)).sum::<f64>();
            dof += d.len() - 1;
        }
    }
    let pooled = (dof > 0).then(|| ss / dof as f64);
    let mut rows: Vec<Row> = by_env
        .into_iter()
        .filter_map(|(env, rs)| {
            let mut accepted: Vec<&&RankedRun> = rs.iter().filter(|r| r.accepted).collect();
            if accepted.is_empty() {
                return None;
            }
            accepted.sort_by_key(|r| r.order);
            let n = accepted.len() as f64;
            let mean = accepted.iter().map(|r| r.delta_pp).sum::<f64>() / n;
            let known: Vec<f64> = accepted.iter().filter_map(|r| r.stderr_pp).map(|s| s.powi(2)).collect();
            let eval_var = (!known.is_empty()).then(|| known.iter().sum::<f64>() / known.len() as f64);
            let v = match (pooled, eval_var) {
                (Some(p), Some(e)) => Some(p.max(e)),
                (p, e) => p.or(e),
            };
            Some(Row {
                environment_id: env.to_string(),
                rank: 0,
                delta_pp: mean,
                stderr_pp: v.map(|v| (v / n).sqrt()),
                verified_runs: accepted.len() as u32,
                rejected_runs: rs.iter().filter(|r| !r.accepted).count() as u32,
                run_deltas_pp: accepted.iter().map(|r| r.delta_pp).collect(),
                run_ids: accepted.iter().map(|r| r.run_id.clone()).collect(),
                latest_run_id: accepted.last().map(|r| r.run_id.clone()).unwrap_or_default(),
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        shown(b.delta_pp).total_cmp(&shown(a.delta_pp)).then(a.environment_id.cmp(&b.environment_id))
    });
    let mut rank = 0;
    for i in 0..rows.len() {
        if i == 0 || shown(rows[i].delta_pp) != shown(rows[i - 1].delta_pp) {
            rank = i as u32 + 1;
        }
        rows[i].rank = rank;
    }
    (rows, pooled.map(f64::sqrt))
}

/// Whether a row's 95% interval overlaps the leader's: the difference is not clear. An unknown
/// standard error is no width.
pub fn tied_with_leader(row: (f64, Option<f64>), leader: (f64, Option<f64>)) -> bool {
    let z = crate::score::Z95;
    row.0 + z * row.1.unwrap_or(0.0) >= leader.0 - z * leader.1.unwrap_or(0.0)
}
