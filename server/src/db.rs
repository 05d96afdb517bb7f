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

pub(crate) static SQLITE: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

impl Db {
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
                Ok(Db { pool, writer, backend })
            }
            Backend::Postgres => {
                let pool = AnyPoolOptions::new().max_connections(16).connect_with(options).await?;
                Ok(Db { writer: pool.clone(), pool, backend })
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
