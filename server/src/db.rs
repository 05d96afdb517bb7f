//! The database: SQLite by default, PostgreSQL when `DATABASE_URL=postgres://…`. Queries go through
//! sqlx's `Any` driver with `$n` placeholders, which both backends accept; migrations are per backend.

use std::str::FromStr;

use sqlx::any::{install_default_drivers, AnyPoolOptions};
use sqlx::AnyPool;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Clone)]
pub struct Db {
    /// For reads (and for writes on PostgreSQL).
    pub pool: AnyPool,
    /// For writes. On SQLite this is one connection: writers queue here in order instead of
    /// contending for SQLite's file lock, whose busy-wait backs off in sleeps that make the tail
    /// latency of writes long. On PostgreSQL it is the same pool.
    pub writer: AnyPool,
    pub backend: Backend,
    /// Fired after a transaction that wrote an ending commits (`Db::ended`): the webhooks pass
    /// wakes on it.
    pub endings: std::sync::Arc<tokio::sync::Notify>,
}

/// A 0/1 INTEGER column read as a flag: sqlx's `Any` reads `bool` only from a BOOLEAN column,
/// and the SQLite schema has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flag(pub bool);

impl From<i64> for Flag {
    fn from(v: i64) -> Flag {
        Flag(v != 0)
    }
}

/// A `bool` field read from a 0/1 column: `#[sqlx(try_from = "Flag")] pub delivered: bool`.
impl From<Flag> for bool {
    fn from(f: Flag) -> bool {
        f.0
    }
}

impl sqlx::Type<sqlx::Any> for Flag {
    fn type_info() -> sqlx::any::AnyTypeInfo {
        <i64 as sqlx::Type<sqlx::Any>>::type_info()
    }

    fn compatible(ty: &sqlx::any::AnyTypeInfo) -> bool {
        <i64 as sqlx::Type<sqlx::Any>>::compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Any> for Flag {
    fn decode(value: sqlx::any::AnyValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        <i64 as sqlx::Decode<'r, sqlx::Any>>::decode(value).map(Flag::from)
    }
}

/// A value stored as JSON in a TEXT column, read with serde (sqlx's `Any` driver has no JSON type).
/// A NULL reads as JSON `null`: `JsonText<Option<T>>` is `None` for it, and a `T` that is not
/// optional fails on it. Text that does not deserialize is a decode error naming the column,
/// never a default. A row struct keeps the plain type, reading through this one:
/// `#[sqlx(try_from = "JsonText<Option<Plan>>")] pub eval_plan: Option<Plan>` (the `From`s below
/// unwrap it; a type of the server's own implements `From<JsonText<Self>>` beside it).
#[derive(Debug, Clone, PartialEq)]
pub struct JsonText<T>(pub T);

impl<T> sqlx::Type<sqlx::Any> for JsonText<T> {
    fn type_info() -> sqlx::any::AnyTypeInfo {
        <String as sqlx::Type<sqlx::Any>>::type_info()
    }

    fn compatible(ty: &sqlx::any::AnyTypeInfo) -> bool {
        <String as sqlx::Type<sqlx::Any>>::compatible(ty)
    }
}

impl<'r, T: serde::de::DeserializeOwned> sqlx::Decode<'r, sqlx::Any> for JsonText<T> {
    fn decode(value: sqlx::any::AnyValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        use sqlx::ValueRef;
        if value.is_null() {
            return Ok(JsonText(serde_json::from_str("null")?));
        }
        let text = <String as sqlx::Decode<'r, sqlx::Any>>::decode(value)?;
        Ok(JsonText(serde_json::from_str(&text)?))
    }
}

impl<T> From<JsonText<Option<T>>> for Option<T> {
    fn from(j: JsonText<Option<T>>) -> Option<T> {
        j.0
    }
}

impl<T> From<JsonText<Vec<T>>> for Vec<T> {
    fn from(j: JsonText<Vec<T>>) -> Vec<T> {
        j.0
    }
}

pub(crate) static SQLITE: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

impl Db {
    /// Says an ending was committed (a permit is kept if no pass is waiting).
    pub fn ended(&self) {
        self.endings.notify_one();
    }

    pub async fn connect(url: &str) -> anyhow::Result<Db> {
        install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            anyhow::bail!("DATABASE_URL must start with sqlite: or postgres://");
        };
        let options = sqlx::any::AnyConnectOptions::from_str(url)?;
        match backend {
            // One writer at a time is SQLite's rule anyway; WAL lets readers go on beside it.
            Backend::Sqlite => {
                let sqlite = |max| {
                    AnyPoolOptions::new().max_connections(max).after_connect(|conn, _| {
                        Box::pin(async move {
                            sqlx::query("PRAGMA journal_mode = WAL").execute(&mut *conn).await?;
                            sqlx::query("PRAGMA busy_timeout = 5000").execute(&mut *conn).await?;
                            sqlx::query("PRAGMA foreign_keys = ON").execute(&mut *conn).await?;
                            Ok(())
                        })
                    })
                };
                let pool = sqlite(8).connect_with(options.clone()).await?;
                let writer = sqlite(1).connect_with(options).await?;
                Ok(Db { pool, writer, backend, endings: Default::default() })
            }
            Backend::Postgres => {
                let pool = AnyPoolOptions::new().max_connections(16).connect_with(options).await?;
                Ok(Db { writer: pool.clone(), pool, backend, endings: Default::default() })
            }
        }
    }

    /// Applies the backend's migrations. Applied migrations are never edited.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        match self.backend {
            Backend::Sqlite => SQLITE.run(&self.writer).await?,
            Backend::Postgres => POSTGRES.run(&self.pool).await?,
        }
        Ok(())
    }
}
