//! Webhooks: an account registers receivers for what ended, and the arena delivers each ending
//! (`crate::endings`) at least once, signed, through the one guarded client (`super::client`).
//! One pass fans new endings out into deliveries (each built from what the account may read, so
//! a body never says more than the API would), then sends what is due, retrying with backoff
//! (`domain::webhooks::retry_after_s`) for a bounded time. Nothing here ever holds a run up: an
//! ending is written with the run's own write, and everything after it is this pass's.

use domain::endings::Track;
use domain::ids::{DeliveryId, WebhookId};
use domain::webhooks::{Event, Format, MAX_PER_ACCOUNT};
use domain::ErrorCode;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::endings::Ending;
use crate::http::ApiError;
use crate::identity::Identity;
use crate::webhooks::client::Answered;
use crate::webhooks::repo::{self, AfterAttempt, Delivery, NewDelivery, Webhook};
use crate::AppState;

/// `POST /api/webhooks`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    /// The receiver: `https://` and a public address (loopback over plain http only on a local
    /// trial, `dev/run`).
    #[schema(max_length = 2048)]
    pub url: String,
    /// What it is told: `run.ended`, `submission.decided`, `result.verified` (all when absent).
    #[serde(default)]
    pub events: Option<Vec<String>>,
    /// `json` (signed, the default), `slack` or `discord`.
    #[serde(default)]
    pub format: Option<String>,
}

/// A webhook as its owner reads it (the secret only once, when it is made).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookView {
    pub webhook_id: String,
    pub url: String,
    pub events: Vec<Event>,
    pub format: Format,
    pub created_at: String,
    /// Shown once, in the answer to its registration: `X-Arena-Signature` is HMAC-SHA256 of
    /// `t.body` under it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// One delivery and its attempts.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeliveryView {
    pub delivery_id: String,
    pub event: Event,
    /// `pending`, `delivered` or `failed` (its time is up, or its webhook was deleted).
    pub state: String,
    pub attempts: Vec<AttemptView>,
    /// When the next try is due (`pending`).
    pub next_at_epoch: Option<i64>,
    pub body: Value,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AttemptView {
    pub at: String,
    /// The receiver's HTTP status; null when it gave none.
    pub status: Option<i64>,
    /// Why there was no status (refused, no answer in time, …).
    pub error: Option<String>,
}

/// `secret`: the secret in clear, shown this once (at registration or rotation).
fn view(w: &Webhook, secret: Option<String>) -> WebhookView {
    WebhookView {
        webhook_id: w.id.clone(),
        url: w.url.clone(),
        events: serde_json::from_str::<Vec<String>>(&w.events)
            .unwrap_or_default()
            .iter()
            .filter_map(|e| Event::parse(e))
            .collect(),
        format: Format::parse(&w.format).unwrap_or_default(),
        created_at: w.created_at.clone(),
        secret,
    }
}

fn refused(why: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::WebhookUrlRefused, why)
}

/// The key webhook secrets are sealed with, or why webhooks cannot be registered.
fn seal_key(s: &AppState) -> Result<&crate::webhooks::sealed::SealKey, ApiError> {
    s.webhook_key.as_deref().ok_or_else(|| {
        ApiError::new(
            ErrorCode::WebhooksNotConfigured,
            "this arena has no key to keep webhook secrets with (ARENA_WEBHOOK_KEY); an organizer sets it",
        )
    })
}

/// A new webhook secret, in clear (shown once) and sealed for webhook `id` (stored).
fn new_secret(key: &crate::webhooks::sealed::SealKey, id: &str) -> (String, String) {
    let secret = format!("whsec_{}", crate::identity::random_secret());
    let sealed = key.seal(id, &secret);
    (secret, sealed)
}

/// Registers a webhook: its URL checked now (and again at each delivery), at most
/// `MAX_PER_ACCOUNT` an account. Answers it with its secret, shown this once; it is stored sealed
/// (`super::sealed`).
pub async fn register(s: &AppState, me: &Identity, body: NewWebhook) -> Result<WebhookView, ApiError> {
    let key = seal_key(s)?;
    let invalid = |why: String| ApiError::new(ErrorCode::InvalidWebhook, why);
    let events = match &body.events {
        None => Event::ALL.to_vec(),
        Some(names) if names.is_empty() || names.len() > Event::ALL.len() => {
            return Err(invalid(
                "`events` names 1 to 3 of run.ended, submission.decided, result.verified".into(),
            ))
        }
        Some(names) => names
            .iter()
            .map(|n| {
                Event::parse(n).ok_or_else(|| {
                    invalid(format!(
                        "`{n}` is not an event: run.ended, submission.decided or result.verified"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let format = match body.format.as_deref() {
        None => Format::Json,
        Some(f) => Format::parse(f)
            .ok_or_else(|| invalid(format!("`{f}` is not a format: json, slack or discord")))?,
    };
    let url = s.webhooks.check(&body.url).await.map_err(|e| refused(e.0))?;
    let now = s.now();
    let names: Vec<&str> = events.iter().map(|e| e.as_str()).collect();
    let id = format!("wh-{}", crate::identity::random_hex(8));
    let (secret, sealed) = new_secret(key, &id);
    let w = Webhook {
        id,
        account_id: me.id.clone(),
        url: url.to_string(),
        events: serde_json::to_string(&names).expect("JSON"),
        format: format.as_str().to_string(),
        secret: sealed,
        created_at: now.text.clone(),
    };
    if !repo::insert(&s.db, &w, now.epoch, MAX_PER_ACCOUNT as i64).await? {
        return Err(ApiError::new(
            ErrorCode::WebhookLimit,
            format!("your account keeps {MAX_PER_ACCOUNT} webhooks at most: delete one first"),
        ));
    }
    Ok(view(&w, Some(secret)))
}

pub async fn list(s: &AppState, me: &Identity) -> Result<Vec<WebhookView>, ApiError> {
    Ok(repo::of_account(&s.db, &me.id).await?.iter().map(|w| view(w, None)).collect())
}

/// A new secret for the account's webhook, shown this once; the old one no longer signs.
pub async fn rotate_secret(s: &AppState, me: &Identity, id: &WebhookId) -> Result<WebhookView, ApiError> {
    let key = seal_key(s)?;
    let id = id.as_str();
    let (secret, sealed) = new_secret(key, id);
    if !repo::set_secret(&s.db, &me.id, id, &sealed).await? {
        return Err(not_found(id));
    }
    let w = repo::get(&s.db, &me.id, id).await?.ok_or_else(|| not_found(id))?;
    Ok(view(&w, Some(secret)))
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(ErrorCode::WebhookNotFound, format!("you have no webhook `{id}`"))
}

pub async fn delete(s: &AppState, me: &Identity, id: &WebhookId) -> Result<(), ApiError> {
    let id = id.as_str();
    if !repo::delete(&s.db, &me.id, id).await? {
        return Err(not_found(id));
    }
    Ok(())
}

/// A webhook's newest deliveries (at most 100), each with its attempts.
pub async fn deliveries(s: &AppState, me: &Identity, id: &WebhookId) -> Result<Vec<DeliveryView>, ApiError> {
    let id = id.as_str();
    repo::get(&s.db, &me.id, id).await?.ok_or_else(|| not_found(id))?;
    Ok(repo::deliveries_with_attempts(&s.db, id, 100)
        .await?
        .into_iter()
        .map(|(d, attempts)| DeliveryView {
            attempts: attempts
                .into_iter()
                .map(|a| AttemptView { at: a.at, status: a.status, error: a.error })
                .collect(),
            event: Event::parse(&d.event).unwrap_or(Event::RunEnded),
            next_at_epoch: (d.state == "pending").then_some(d.next_epoch),
            body: serde_json::from_str(&d.body).unwrap_or(Value::Null),
            state: d.state,
            delivery_id: d.id,
        })
        .collect())
}

/// Sends a delivery again at the next pass.
pub async fn redeliver(
    s: &AppState,
    me: &Identity,
    id: &WebhookId,
    delivery_id: &DeliveryId,
) -> Result<(), ApiError> {
    use domain::webhooks::{REDELIVERIES_PER_WINDOW, REDELIVERY_WINDOW_S};
    let (id, delivery_id) = (id.as_str(), delivery_id.as_str());
    repo::get(&s.db, &me.id, id).await?.ok_or_else(|| not_found(id))?;
    let now = s.now().epoch;
    let bound = (REDELIVERIES_PER_WINDOW, REDELIVERY_WINDOW_S);
    match repo::redeliver(&s.db, &me.id, id, delivery_id, now, bound).await? {
        repo::Redelivered::Queued => {
            s.db.ended();
            Ok(())
        }
        repo::Redelivered::NoSuch => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("webhook `{id}` has no delivery `{delivery_id}`"),
        )),
        repo::Redelivered::Spent { until_epoch } => Err(ApiError::new(
            ErrorCode::RateLimited,
            format!(
                "webhook `{id}` was asked for {REDELIVERIES_PER_WINDOW} redeliveries within {} minutes, its most; \
                 nothing was queued",
                REDELIVERY_WINDOW_S / 60
            ),
        )
        .retry_after((until_epoch - now).max(1) as u64)),
    }
}

/// The pass: new endings fanned out into deliveries, then the due deliveries sent.
pub async fn pass(s: &AppState) -> anyhow::Result<usize> {
    use anyhow::Context;
    fan_out(s).await.context("fanning endings out to webhooks")?;
    crate::engine::pass(s, &Deliveries).await
}

/// Each new ending, for every webhook of its account that takes its event: one delivery with the
/// body the account may read. An ending no webhook takes is only marked fanned out.
async fn fan_out(s: &AppState) -> anyhow::Result<()> {
    for ending in crate::endings::pending(&s.db, 200).await? {
        let hooks = repo::of_account(&s.db, &ending.account_id).await?;
        let takers: Vec<&Webhook> =
            hooks.iter().filter(|w| w.events.contains(&format!("\"{}\"", ending.kind))).collect();
        let mut bodies = Vec::new();
        if !takers.is_empty() {
            let (event, sentence) = describe(s, &ending).await?;
            for w in &takers {
                let format = Format::parse(&w.format).unwrap_or_default();
                let body = format.body(&event, &sentence).to_string();
                bodies.push((w.id.clone(), format!("dl-{}", crate::identity::random_hex(10)), body));
            }
        }
        let new: Vec<NewDelivery> = bodies
            .iter()
            .map(|(webhook_id, id, body)| NewDelivery { id, webhook_id, event: &ending.kind, body })
            .collect();
        repo::fan_out(&s.db, &ending, &new, s.now().epoch).await?;
    }
    Ok(())
}

/// What an ending says, as its account reads it (the participant's views, never an editor's), and
/// the sentence the chat formats post.
async fn describe(s: &AppState, e: &Ending) -> anyhow::Result<(Value, String)> {
    let base = s.public_url.trim_end_matches('/');
    let (kind, id) = e.subject.split_once(':').unwrap_or_default();
    let (what, sentence) = match (e.kind.as_str(), Track::parse(kind)) {
        ("run.ended", Some(Track::Collection)) => collection_run(s, base, id).await?,
        ("run.ended", Some(Track::Openenv)) => openenv_run(s, base, id).await?,
        ("submission.decided", _) => submission(s, base, e, id).await?,
        _ => result(s, base, id).await?,
    };
    let key = e.kind.split('.').next().unwrap_or_default();
    let mut event = json!({"event": e.kind, "at": e.at});
    event[key] = what;
    Ok((event, format!("Open Env Arena: {sentence}")))
}

fn delta_words(delta: Option<f64>, stderr: Option<f64>) -> String {
    match (delta, stderr) {
        (Some(d), Some(se)) => format!(", Δ {d:+.1} pp ± {se:.1}"),
        (Some(d), None) => format!(", Δ {d:+.1} pp"),
        _ => String::new(),
    }
}

/// A failure's code, when its reason starts with one (`CODE: why`).
fn code_of(reason: Option<&str>) -> Option<String> {
    let (code, _) = reason?.split_once(':')?;
    (!code.is_empty() && code.chars().all(|c| c.is_ascii_uppercase() || c == '_')).then(|| code.to_string())
}

async fn collection_run(s: &AppState, base: &str, id: &str) -> anyhow::Result<(Value, String)> {
    let run = crate::runs::repo::get(&s.db, id).await?.ok_or_else(|| anyhow::anyhow!("no run {id}"))?;
    let result = crate::results::repo::get(&s.db, id).await?;
    let (delta, stderr) =
        result.as_ref().map_or((None, None), |r| (Some(r.measured.delta_pp), r.measured.stderr_pp));
    let page = format!("{base}/arena/runs/{id}");
    let state = run.state.as_str();
    let what = json!({
        "track": "collection", "run_id": id, "challenge_id": run.challenge_id, "state": state,
        "reason": run.reason, "reason_code": code_of(run.reason.as_deref()), "delta_pp": delta, "stderr_pp": stderr,
        "links": {"page": page, "api": format!("{base}/api/challenges/{}/runs/{id}", run.challenge_id)},
    });
    Ok((what, format!("run {id} on {} {state}{}. {page}", run.challenge_id, delta_words(delta, stderr))))
}

async fn openenv_run(s: &AppState, base: &str, id: &str) -> anyhow::Result<(Value, String)> {
    let run =
        crate::openenv::runs::repo::get(&s.db, id).await?.ok_or_else(|| anyhow::anyhow!("no run {id}"))?;
    let events = crate::openenv::runs::repo::events(&s.db, id).await?;
    let records = crate::openenv::runs::repo::eval_records(&s.db, Some(id)).await?;
    let records = records.get(id).map(Vec::as_slice).unwrap_or_default();
    // The participant's view of the evaluation: aggregates only.
    let evaluation = crate::openenv::runs::service::evaluation_of(&run, &events, records, false);
    let figures = evaluation.as_ref().map(|e| &e.figures);
    let (delta, stderr) = (figures.and_then(|f| f.delta_pp), figures.and_then(|f| f.stderr_pp));
    let page = format!("{base}/arena/openenv/runs/{id}");
    let state = run.state.as_str();
    let what = json!({
        "track": "openenv", "run_id": id, "submission_id": run.submission_id, "state": state,
        "policy_version": run.policy_version, "reason_code": run.error_code, "reason": run.message,
        "delta_pp": delta, "stderr_pp": stderr,
        "links": {"page": page, "api": format!("{base}/api/openenv/runs/{id}")},
    });
    Ok((
        what,
        format!(
            "OpenEnv run {id} {state} after {} optimizer steps{}. {page}",
            run.policy_version,
            delta_words(delta, stderr)
        ),
    ))
}

async fn submission(s: &AppState, base: &str, e: &Ending, id: &str) -> anyhow::Result<(Value, String)> {
    let submission_id = id.split_once('/').map_or(id, |(_, sub)| sub);
    let stored = crate::openenv::repo::get(&s.db, &e.account_id, submission_id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no submission {id}"))?;
    let report: domain::openenv::SubmissionReport = serde_json::from_str(&stored.report)?;
    let codes: Vec<&str> = report.errors.iter().map(|r| r.code.as_str()).collect();
    let what = json!({
        "submission_id": submission_id, "state": stored.state.as_str(), "error_origin": stored.error_origin,
        "slot": stored.slot_state.as_str(), "codes": codes,
        "links": {"page": format!("{base}/arena/openenv"), "api": format!("{base}/api/openenv/submissions/{submission_id}")},
    });
    let why = if codes.is_empty() { String::new() } else { format!(" ({})", codes.join(", ")) };
    Ok((
        what,
        format!("OpenEnv submission {submission_id} {}{why}. {base}/arena/openenv", stored.state.as_str()),
    ))
}

async fn result(s: &AppState, base: &str, run_id: &str) -> anyhow::Result<(Value, String)> {
    let r = crate::results::repo::get(&s.db, run_id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no result {run_id}"))?;
    let (delta, stderr) = (r.measured.delta_pp, r.measured.stderr_pp);
    let page = format!("{base}/arena/runs/{run_id}");
    let what = json!({
        "run_id": run_id, "challenge_id": r.challenge_id, "environment_id": r.environment_id, "review": r.review,
        "delta_pp": delta, "stderr_pp": stderr,
        "links": {"page": page, "api": format!("{base}/api/challenges/{}/runs/{run_id}/result", r.challenge_id)},
    });
    Ok((
        what,
        format!("the result of run {run_id} was {}{}. {page}", r.review, delta_words(Some(delta), stderr)),
    ))
}

/// `X-Arena-Signature`: `t=UNIX,v1=HEX`, HEX = HMAC-SHA256(secret, "t.body").
pub fn signature(secret: &str, t: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// Deliveries due, on the engine: each under its lease, so that two servers never send one
/// attempt twice (a receiver may still see one delivery more than once: at least once).
pub struct Deliveries;

#[async_trait::async_trait]
impl crate::engine::Track for Deliveries {
    type Key = String;
    const RECORD: &'static str = "delivery";

    fn at_once(&self) -> usize {
        8
    }

    fn lease_s(&self, _: &AppState) -> i64 {
        // Past one attempt's whole time.
        3 * domain::webhooks::TIMEOUT_S as i64
    }

    async fn due(&self, s: &AppState) -> anyhow::Result<Vec<String>> {
        Ok(repo::due(&s.db, s.now().epoch, 200).await?)
    }

    const LEASE: crate::engine::RowLease = repo::DELIVERY_LEASE;

    fn key_values(k: &String) -> Vec<&str> {
        vec![k.as_str()]
    }

    async fn step(&self, s: &AppState, id: &String) -> anyhow::Result<bool> {
        send(s, id).await
    }
}

/// One attempt of one delivery; true when it was delivered.
async fn send(s: &AppState, id: &str) -> anyhow::Result<bool> {
    let Some(d) = repo::delivery(&s.db, id).await? else { return Ok(false) };
    if d.state != "pending" || d.next_epoch > s.now().epoch {
        return Ok(false);
    }
    let Some(w) = webhook_of(s, &d).await? else {
        let now = s.now();
        repo::attempted(&s.db, &d, &now, None, Some("its webhook was deleted"), AfterAttempt::GivenUp)
            .await?;
        return Ok(false);
    };
    // Checked at start: every stored secret opens with the key (`sealed::check_at_start`).
    let Some(secret) = s.webhook_key.as_deref().and_then(|k| k.open(&w.id, &w.secret)) else {
        let now = s.now();
        let why = "its secret could not be opened (ARENA_WEBHOOK_KEY)";
        repo::attempted(&s.db, &d, &now, None, Some(why), AfterAttempt::GivenUp).await?;
        return Ok(false);
    };
    let t = s.now().epoch;
    let headers = [
        ("x-arena-event", d.event.clone()),
        ("x-arena-delivery", d.id.clone()),
        ("x-arena-signature", signature(&secret, t, d.body.as_bytes())),
    ];
    let answered = s.webhooks.post(&w.url, &headers, d.body.clone().into_bytes()).await;
    let now = s.now();
    let attempt = (d.attempts + 1) as u32;
    let again = || match domain::webhooks::retry_after_s(attempt) {
        Some(wait) => AfterAttempt::Again { next_epoch: now.epoch + wait },
        None => AfterAttempt::GivenUp,
    };
    let (status, error, after) = match answered {
        Answered::Status(code) if (200..300).contains(&code) => (Some(code), None, AfterAttempt::Delivered),
        Answered::Status(code) => (Some(code), None, again()),
        Answered::NoAnswer(why) => (None, Some(why), again()),
    };
    let delivered = matches!(after, AfterAttempt::Delivered);
    repo::attempted(&s.db, &d, &now, status, error.as_deref(), after).await?;
    if delivered {
        tracing::info!(delivery = %d.id, after_s = now.epoch - d.ended_epoch, "a webhook delivery arrived");
    }
    Ok(delivered)
}

async fn webhook_of(s: &AppState, d: &Delivery) -> Result<Option<Webhook>, sqlx::Error> {
    let owner: Option<String> = sqlx::query_scalar("SELECT account_id FROM webhooks WHERE id = $1")
        .bind(&d.webhook_id)
        .fetch_optional(&s.db.pool)
        .await?;
    match owner {
        Some(account) => repo::get(&s.db, &account, &d.webhook_id).await,
        None => Ok(None),
    }
}
