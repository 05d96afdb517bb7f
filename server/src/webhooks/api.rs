//! `/api/webhooks`: an account's receivers for what ended, their deliveries and redelivery. Signed
//! in or with a Bearer token; each account sees and changes its own only.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::ids::{DeliveryId, WebhookId};
use domain::ApiErrorBody;

use crate::http::ids::{IdPath, IdPaths};
use crate::http::{ApiError, ApiJson};
use crate::identity::User;
use crate::webhooks::service::{self, DeliveryView, NewWebhook, WebhookView};
use crate::AppState;

#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct WebhookList {
    pub webhooks: Vec<WebhookView>,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct DeliveryList {
    /// Newest first (at most 100), each with its attempts.
    pub deliveries: Vec<DeliveryView>,
}

#[utoipa::path(post, path = "/api/webhooks", tag = "webhooks", request_body = NewWebhook,
    responses((status = 201, description = "registered: its `secret` is shown this once", body = WebhookView),
        (status = 401, body = ApiErrorBody), (status = 403, description = "CSRF_INVALID", body = ApiErrorBody),
        (status = 409, description = "WEBHOOK_LIMIT: the account keeps 5 at most", body = ApiErrorBody),
        (status = 422, description = "WEBHOOK_URL_REFUSED (not https, or the host resolves to a loopback, private, link-local, unique-local or metadata address) or INVALID_WEBHOOK", body = ApiErrorBody),
        (status = 503, description = "WEBHOOKS_NOT_CONFIGURED: the arena has no key to keep secrets with", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn register(
    State(s): State<AppState>,
    User(me): User,
    ApiJson(body): ApiJson<NewWebhook>,
) -> Result<(StatusCode, Json<WebhookView>), ApiError> {
    Ok((StatusCode::CREATED, Json(service::register(&s, &me, body).await?)))
}

#[utoipa::path(get, path = "/api/webhooks", tag = "webhooks",
    responses((status = 200, description = "your webhooks (no secret)", body = WebhookList), (status = 401, body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn list(State(s): State<AppState>, User(me): User) -> Result<Json<WebhookList>, ApiError> {
    Ok(Json(WebhookList { webhooks: service::list(&s, &me).await? }))
}

#[utoipa::path(delete, path = "/api/webhooks/{id}", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 204, description = "deleted, with what it had still to deliver"), (status = 401, body = ApiErrorBody),
        (status = 404, description = "WEBHOOK_NOT_FOUND", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn delete(
    State(s): State<AppState>,
    IdPath(id): IdPath<WebhookId>,
    User(me): User,
) -> Result<StatusCode, ApiError> {
    service::delete(&s, &me, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/webhooks/{id}/deliveries", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 200, description = "each delivery: its state, body and attempts (time, status, error)", body = DeliveryList),
        (status = 401, body = ApiErrorBody), (status = 404, description = "WEBHOOK_NOT_FOUND", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn deliveries(
    State(s): State<AppState>,
    IdPath(id): IdPath<WebhookId>,
    User(me): User,
) -> Result<Json<DeliveryList>, ApiError> {
    Ok(Json(DeliveryList { deliveries: service::deliveries(&s, &me, &id).await? }))
}

#[utoipa::path(post, path = "/api/webhooks/{id}/deliveries/{delivery_id}/redeliver", tag = "webhooks",
    params(("id" = String, Path), ("delivery_id" = String, Path)),
    responses((status = 202, description = "sent again at once (its attempts go on from the last)"), (status = 401, body = ApiErrorBody),
        (status = 404, description = "WEBHOOK_NOT_FOUND or NOT_FOUND", body = ApiErrorBody),
        (status = 429, description = "RATE_LIMITED: the webhook's 10 redeliveries an hour are spent (`retry_after_s`, `Retry-After`)", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn redeliver(
    State(s): State<AppState>,
    IdPaths(id, delivery_id): IdPaths<WebhookId, DeliveryId>,
    User(me): User,
) -> Result<StatusCode, ApiError> {
    service::redeliver(&s, &me, &id, &delivery_id).await?;
    Ok(StatusCode::ACCEPTED)
}

#[utoipa::path(post, path = "/api/webhooks/{id}/secret", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 200, description = "a new secret, shown this once; the old one signs no more deliveries", body = WebhookView),
        (status = 401, body = ApiErrorBody), (status = 403, description = "CSRF_INVALID", body = ApiErrorBody),
        (status = 404, description = "WEBHOOK_NOT_FOUND", body = ApiErrorBody),
        (status = 503, description = "WEBHOOKS_NOT_CONFIGURED", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn rotate_secret(
    State(s): State<AppState>,
    IdPath(id): IdPath<WebhookId>,
    User(me): User,
) -> Result<Json<WebhookView>, ApiError> {
    Ok(Json(service::rotate_secret(&s, &me, &id).await?))
}
