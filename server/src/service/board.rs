//! Reads of the board.

use domain::board::MessagePage;

use crate::changes::Snapshot;
use crate::http::ApiError;
use crate::repo::board::Filter;
use crate::{repo, AppState};

/// Newest first. The unfiltered first page, which the front page and most agents read, is kept
/// in memory until the next post.
pub async fn list(s: &AppState, filter: Filter) -> Result<Snapshot<MessagePage>, ApiError> {
    let first_page = filter.agent.is_none()
        && filter.author.is_none()
        && filter.text.is_none()
        && filter.since_epoch.is_none()
        && filter.before_seq.is_none();
    let limit = filter.limit;
    let fill = async move {
        let (messages, more) = repo::board::list(&s.db, &filter).await?;
        let next_before = if more { messages.last().map(|m| m.id.clone()) } else { None };
        Ok(MessagePage { messages, next_before })
    };
    if first_page {
        s.caches.board.get(&s.changes, limit, fill).await
    } else {
        Ok(Snapshot::new(fill.await?)?)
    }
}
