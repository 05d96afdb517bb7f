//! Time formats the arena stores and shows.

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::OffsetDateTime;

pub fn rfc3339(t: OffsetDateTime) -> String {
    t.replace_nanosecond(0).unwrap_or(t).format(&Rfc3339).unwrap_or_default()
}

/// `YYYYMMDD-HHMMSS`, for readable message filenames.
pub fn compact(t: OffsetDateTime) -> String {
    t.format(format_description!("[year][month][day]-[hour][minute][second]")).unwrap_or_default()
}

pub fn parse_rfc3339(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339).ok()
}
