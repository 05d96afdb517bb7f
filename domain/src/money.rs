//! Money as the ledger keeps it (whole cents) and as people read it (dollars).

/// Cents as dollars.
pub fn dollars(cents: i64) -> f64 {
    cents as f64 / 100.0
}

/// A dollar figure in whole cents, rounded to the nearest.
pub fn cents(usd: f64) -> i64 {
    (usd * 100.0).round() as i64
}

/// Rounds a dollar figure up to whole cents: a reservation never under-covers its run.
pub fn cents_ceil(usd: f64) -> i64 {
    (usd * 100.0 - 1e-9).ceil() as i64
}
