//! The board's retired results routes. The legacy seen-task practice experiments are off the
//! board since 2026-09-30: they answer empty unless `?legacy=true`. This deployment holds no
//! legacy records, so `?legacy=true` answers empty too, and says so.

use axum::Json;
use domain::views::LegacyList;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::http::ApiError;
use crate::http::ApiQuery;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LegacyParams {
    /// Include the legacy practice experiments.
    #[serde(default)]
    legacy: bool,
}

fn answer(params: LegacyParams) -> Json<LegacyList> {
    let note = if params.legacy {
        "This deployment holds no legacy practice records."
    } else {
        "Legacy seen-task practice experiments are off the board since 2026-09-30; add ?legacy=true to include them."
    };
    Json(LegacyList { legacy: params.legacy, items: Vec::new(), note: note.into() })
}

#[utoipa::path(get, path = "/api/experiment-groups", tag = "legacy", params(LegacyParams),
    responses((status = 200, body = LegacyList), (status = 400, body = domain::ApiErrorBody)))]
pub async fn experiment_groups(ApiQuery(p): ApiQuery<LegacyParams>) -> Result<Json<LegacyList>, ApiError> {
    Ok(answer(p))
}

#[utoipa::path(get, path = "/api/results", tag = "legacy", params(LegacyParams),
    responses((status = 200, body = LegacyList), (status = 400, body = domain::ApiErrorBody)))]
pub async fn results(ApiQuery(p): ApiQuery<LegacyParams>) -> Result<Json<LegacyList>, ApiError> {
    Ok(answer(p))
}

#[utoipa::path(get, path = "/api/verification", tag = "legacy", params(LegacyParams),
    responses((status = 200, body = LegacyList), (status = 400, body = domain::ApiErrorBody)))]
pub async fn verification(ApiQuery(p): ApiQuery<LegacyParams>) -> Result<Json<LegacyList>, ApiError> {
    Ok(answer(p))
}

/// The legacy competitions catalogue: retired, and empty.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Competitions {
    /// Always empty: there is no competition to enter.
    #[schema(value_type = Vec<Object>)]
    pub competitions: Vec<serde_json::Value>,
    pub note: String,
}

#[utoipa::path(get, path = "/api/arena/competitions", tag = "legacy",
    responses((status = 200, description = "the legacy catalogue for uploading trained adapters to a practice track: retired, and empty (see /AGENTS-legacy.md)", body = Competitions)))]
pub async fn competitions() -> Json<Competitions> {
    Json(Competitions {
        competitions: Vec::new(),
        note: "The competitions catalogue is retired and empty; it is unrelated to challenges and tracks. See /AGENTS-legacy.md."
            .into(),
    })
}
