//! Reads of submitted collections.

use domain::collection::record::{posttrain, EnvironmentList, EnvironmentRecord, SubmissionDetail};
use domain::collection::request::Source;
use domain::collection::Report;
use domain::gates::GATES_VERSION;
use domain::ids::EnvironmentId;
use domain::registry::Challenge;
use domain::ErrorCode;

use crate::changes::{Snapshot, Topic};
use crate::http::ApiError;
use crate::sources::fetch::Fetched;
use crate::sources::SourceError;
use crate::{heldout, AppState};

pub const MAX_LIST: u32 = 500;

/// Newest first; legacy records only when asked.
pub async fn list(
    s: &AppState,
    challenge: Option<&str>,
    legacy: bool,
    limit: u32,
) -> Result<Snapshot<EnvironmentList>, ApiError> {
    if !(1..=MAX_LIST).contains(&limit) {
        return Err(ApiError::new(ErrorCode::InvalidQuery, format!("`limit` must be 1 to {MAX_LIST}")));
    }
    let fill = async {
        let environments = crate::collections::repo::list(&s.db, challenge, legacy, i64::from(limit)).await?;
        Ok(EnvironmentList { environments })
    };
    // Only query shapes from a small set are kept: a challenge the registry has, or none.
    match challenge {
        Some(c) if s.registry.challenge(c).is_none() => Ok(Snapshot::new(fill.await?)?),
        _ => {
            let key = (challenge.map(str::to_string), legacy, limit);
            s.caches.environments.get(&s.changes, key, fill).await
        }
    }
}

/// A collection with the validation stored at submission.
pub async fn get(s: &AppState, id: &EnvironmentId) -> Result<(EnvironmentRecord, Report), ApiError> {
    let (record, report) = crate::collections::repo::get(&s.db, id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::EnvironmentNotFound, format!("no collection `{id}`")))?;
    let report: Report = serde_json::from_str(&report).map_err(ApiError::internal)?;
    Ok((record, report))
}

/// What a collection's page shows: the record, its validation and the PostTrain commands.
pub async fn submission(s: &AppState, id: &EnvironmentId) -> Result<SubmissionDetail, ApiError> {
    let (environment, validation) = get(s, id).await?;
    let posttrain = posttrain(&environment, &validation);
    Ok(SubmissionDetail { environment, validation, posttrain })
}

/// Validates a source for a challenge: the static gates against the challenge's held-out
/// fingerprints. A suite this deployment has no fingerprint of is not the participant's to fix: it
/// is said once, by `/api/version` (`heldout_unchecked`), and each report lists the suites it was
/// compared with (`quality_gates.static.heldout`).
pub async fn validate(
    s: &AppState,
    source: &Source,
    challenge: Option<&Challenge>,
) -> Result<Fetched, SourceError> {
    let held = heldout::for_challenge(&s.fingerprints, challenge);
    s.sources.validate(source, held).await
}

/// How many collections one re-check pass takes (each reads its repository again).
const RECHECK_BATCH: i64 = 4;
const DAY_S: i64 = 24 * 3600;

/// The guide: "the Space re-checks a collection stored under an earlier version from its pinned
/// commit". One pass re-validates a few collections judged by an older gates version and stores
/// the new judgement; the record keeps the version it was first stored under. A source that cannot
/// be read is noted on the record and tried again a day later (ten minutes when it did not answer).
/// Several servers may pass at once: the update applies only over the judgement it replaces.
pub async fn recheck_pass(s: &AppState) -> Result<usize, ApiError> {
    let domain::time::Timestamp { text: now, epoch } = s.now();
    let mut done = 0;
    for id in crate::collections::repo::stale(&s.db, GATES_VERSION, epoch - DAY_S, RECHECK_BATCH).await? {
        let Some((record, _)) = crate::collections::repo::get(&s.db, &id).await? else { continue };
        // When the next try is due: `retry_in` seconds from now.
        let retry = |retry_in: i64| epoch - DAY_S + retry_in;
        // A record stored under the track alone is compared with every suite as not evaluated.
        let challenge = match record.target_challenge_id.as_deref() {
            None => None,
            Some(c) => match s.registry.challenge(c) {
                Some(c) => Some(c),
                None => {
                    let error = format!("the challenge `{c}` is no longer in the registry");
                    crate::collections::repo::recheck_failed(&s.db, &id, &error, retry(DAY_S)).await?;
                    continue;
                }
            },
        };
        let Some(source) = record.pinned_source() else { continue };
        match validate(s, &source, challenge).await {
            Ok(fetched) => {
                if crate::collections::repo::rechecked(
                    &s.db,
                    &id,
                    &record.gates_version,
                    &fetched.report,
                    &now,
                    epoch,
                )
                .await?
                {
                    tracing::info!(collection = %id, from = %record.gates_version, to = GATES_VERSION, valid = fetched.report.valid, "re-checked a collection from its pinned commit");
                    done += 1;
                }
            }
            Err(e @ (SourceError::Unavailable(_) | SourceError::RateLimited { .. })) => {
                crate::collections::repo::recheck_failed(&s.db, &id, &e.to_string(), retry(600)).await?;
            }
            Err(e) => {
                let error = format!("its pinned commit can no longer be read: {e}");
                crate::collections::repo::recheck_failed(&s.db, &id, &error, retry(DAY_S)).await?;
            }
        }
        s.changes.bump(Topic::Environments);
    }
    Ok(done)
}
