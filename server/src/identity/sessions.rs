//! Browser sessions in the database (tower-sessions' SQL store, on either backend). Inside the
//! huggingface.co iframe the cookie is third-party, so it is `SameSite=None; Secure; Partitioned`;
//! local plain-HTTP runs can turn the secure flags off.

use async_trait::async_trait;
use axum::extract::Request;
use axum::http::header::SET_COOKIE;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tower_sessions::cookie::SameSite;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, ExpiredDeletion, SessionStore};
use tower_sessions::{Expiry, SessionManagerLayer};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

use crate::db::Backend;

pub const COOKIE: &str = "arena_session";

#[derive(Debug, Clone)]
pub enum SqlStore {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl SqlStore {
    /// Opens the store's own pool on the arena's database and creates its table.
    pub async fn open(url: &str, backend: Backend) -> anyhow::Result<SqlStore> {
        Ok(match backend {
            Backend::Sqlite => {
                let store = SqliteStore::new(sqlx::SqlitePool::connect(url).await?);
                store.migrate().await?;
                SqlStore::Sqlite(store)
            }
            Backend::Postgres => {
                let store = PostgresStore::new(sqlx::PgPool::connect(url).await?);
                store.migrate().await?;
                SqlStore::Postgres(store)
            }
        })
    }

    /// Deletes the sessions that expired (the `sessions` pass).
    pub async fn delete_expired_now(&self) -> session_store::Result<()> {
        match self {
            SqlStore::Sqlite(s) => s.delete_expired().await,
            SqlStore::Postgres(s) => s.delete_expired().await,
        }
    }
}

#[async_trait]
impl SessionStore for SqlStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            SqlStore::Sqlite(s) => s.create(record).await,
            SqlStore::Postgres(s) => s.create(record).await,
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        match self {
            SqlStore::Sqlite(s) => s.save(record).await,
            SqlStore::Postgres(s) => s.save(record).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match self {
            SqlStore::Sqlite(s) => s.load(id).await,
            SqlStore::Postgres(s) => s.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match self {
            SqlStore::Sqlite(s) => s.delete(id).await,
            SqlStore::Postgres(s) => s.delete(id).await,
        }
    }
}

pub fn layer(store: SqlStore, secure: bool) -> SessionManagerLayer<SqlStore> {
    SessionManagerLayer::new(store)
        .with_name(COOKIE)
        .with_http_only(true)
        .with_secure(secure)
        .with_same_site(if secure { SameSite::None } else { SameSite::Lax })
        .with_expiry(Expiry::OnInactivity(time::Duration::days(7)))
}

/// Adds `Partitioned` to the session cookie (CHIPS), which tower-sessions does not set itself, so
/// browsers that block third-party cookies keep it inside the huggingface.co frame.
pub async fn partition_cookie(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let cookies: Vec<HeaderValue> = resp.headers().get_all(SET_COOKIE).iter().cloned().collect();
    if cookies.iter().any(|c| c.as_bytes().starts_with(COOKIE.as_bytes())) {
        let headers = resp.headers_mut();
        headers.remove(SET_COOKIE);
        for cookie in cookies {
            let text = cookie.to_str().unwrap_or_default();
            let value =
                if text.starts_with(COOKIE) && text.contains("Secure") && !text.contains("Partitioned") {
                    HeaderValue::from_str(&format!("{text}; Partitioned")).unwrap_or(cookie)
                } else {
                    cookie
                };
            headers.append(SET_COOKIE, value);
        }
    }
    resp
}
