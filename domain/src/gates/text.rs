//! Prompt comparison by 13-word shingles. Normalisation: lower-case, every character that is not a
//! letter or digit becomes a space, then words are split on whitespace; so punctuation, Markdown
//! markup, line breaks and case do not hide a copy. Each 13-word window is hashed with 64-bit
//! FNV-1a over the words joined by single spaces; fingerprints store only these hashes, so a
//! sealed suite's prompts are never published. A prompt shorter than 13 words has no shingles and
//! is not compared.

use std::collections::BTreeSet;

pub const SHINGLE_WORDS: usize = 13;

pub fn words(text: &str) -> Vec<String> {
    let lowered: String = text
        .chars()
        .map(|c| if c.is_alphanumeric() { c.to_lowercase().next().unwrap_or(c) } else { ' ' })
        .collect();
    lowered.split_whitespace().map(str::to_string).collect()
}

fn fnv1a(parts: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            h ^= u64::from(b' ');
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        for b in part.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The set of shingle hashes of a text.
pub fn shingles(text: &str) -> BTreeSet<u64> {
    let ws = words(text);
    if ws.len() < SHINGLE_WORDS {
        return BTreeSet::new();
    }
    ws.windows(SHINGLE_WORDS).map(fnv1a).collect()
}

/// Containment both ways: the larger of |A∩B|/|A| and |A∩B|/|B| (a prompt that embeds a whole
/// held-out prompt in extra text is as much a copy as a trimmed one).
pub fn containment(a: &BTreeSet<u64>, b: &BTreeSet<u64>) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let shared = a.intersection(b).count() as f64;
    (shared / a.len() as f64).max(shared / b.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "Reconcile the ledger in /data/ledger.csv against the bank statement, flag every \
        transaction whose amount differs by more than one cent, and write the flagged ids to /out/flags.txt \
        sorted by date then by id.";

    #[test]
    fn ignores_case_punctuation_and_layout() {
        let reformatted = P.to_uppercase().replace(", ", ",\n  ").replace('.', "!");
        assert_eq!(shingles(P), shingles(&reformatted));
        assert!(shingles("too short to compare").is_empty());
    }

    #[test]
    fn measures_near_copies() {
        let a = shingles(P);
        let edited = shingles(&P.replace("sorted by date", "ordered by date"));
        let c = containment(&edited, &a);
        assert!(c > 0.5 && c < 1.0, "{c}");
        let unrelated = shingles("Write a function that parses ISO dates and returns the weekday for each of them, in a list, with tests for leap years included.");
        assert_eq!(containment(&unrelated, &a), 0.0);
    }
}
