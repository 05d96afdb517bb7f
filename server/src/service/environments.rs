//! Reads of submitted collections.

use domain::collection::record::{posttrain, EnvironmentRecord, SubmissionDetail};
use domain::collection::Report;
use domain::ErrorCode;
use serde::Serialize;
use utoipa::ToSchema;

use crate::changes::Snapshot;
use crate::http::ApiError;
use crate::{repo, AppState};

#[derive(Serialize, ToSchema)]
pub struct EnvironmentList {
    pub environments: Vec<EnvironmentRecord>,
}

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
        let environments = repo::environments::list(&s.db, challenge, legacy, i64::from(limit)).await?;
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
pub async fn get(s: &AppState, id: &str) -> Result<(EnvironmentRecord, Report), ApiError> {
    let (record, report) = repo::environments::get(&s.db, id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::EnvironmentNotFound, format!("no collection `{id}`")))?;
    let report: Report = serde_json::from_str(&report).map_err(ApiError::internal)?;
    Ok((record, report))
}

/// What a collection's page shows: the record, its validation and the PostTrain commands.
pub async fn submission(s: &AppState, id: &str) -> Result<SubmissionDetail, ApiError> {
    let (environment, validation) = get(s, id).await?;
    let posttrain = posttrain(&environment, &validation);
    Ok(SubmissionDetail { environment, validation, posttrain })
}
