//! TRL's per-step lines on a job's output, read by the job script (then sent over the relay) and
//! by the reconciler from the log's tail when the relay is off: the same rule for both.
//!
//! transformers' `ProgressCallback.on_log` (5.6 to 5.13, what the pipeline pins) writes each
//! `Trainer.log` call to stdout with `tqdm.write(str(logs))`, every float first formatted as the
//! string `f"{v:.4g}"`: `{'loss': '0.01235', 'grad_norm': '0.5341', 'learning_rate': '1e-06', …,
//! 'epoch': '0.0125'}` (ints and `None` bare), next to the progress bar's carriage returns on
//! stderr. A step's line has `loss`; the summary at the end has `train_loss` instead and is not a
//! step. `step` is not printed: it is counted from the rollout lines.

use super::{TrainMetrics, TrainPoint};
use crate::pipeline::steps::{self, StepKind};

/// A longer line is not TRL's: it is not read.
const MAX_LINE: usize = 16 * 1024;

/// The `(key, number)` pairs of a Python dict's `repr` at the end of `line`; values that are not
/// numbers (strings, `None`, lists) are skipped, `nan` and `inf` read as non-finite.
pub fn python_dict(line: &str) -> Option<Vec<(&str, f64)>> {
    if line.len() > MAX_LINE {
        return None;
    }
    let line = line.trim_end();
    let start = line.rfind("{'")?;
    let body = line[start..].strip_prefix('{')?.strip_suffix('}')?;
    let mut pairs = Vec::new();
    let mut rest = body.trim_start();
    while !rest.is_empty() {
        let after_quote = rest.strip_prefix('\'')?;
        let end = after_quote.find('\'')?;
        let key = &after_quote[..end];
        rest = after_quote[end + 1..].trim_start().strip_prefix(':')?.trim_start();
        let (value, tail) = python_value(rest)?;
        if let Some(v) = value {
            pairs.push((key, v));
        }
        rest = tail.trim_start();
        rest = match rest.strip_prefix(',') {
            Some(r) => r.trim_start(),
            None if rest.is_empty() => rest,
            None => return None,
        };
    }
    Some(pairs)
}

/// One value of a dict's `repr`: a number, bare, quoted as transformers formats it (`'1e-06'`)
/// or wrapped (`np.float64(0.5)`, `tensor(0.5)`); anything else is skipped to the next
/// top-level comma.
fn python_value(s: &str) -> Option<(Option<f64>, &str)> {
    let end = top_level_end(s)?;
    let (text, tail) = s.split_at(end);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let quoted = text.len() >= 2 && text.starts_with('\'') && text.ends_with('\'');
    let inner = match (text.find('('), text.ends_with(')')) {
        _ if quoted => &text[1..text.len() - 1],
        (Some(open), true) => text[open + 1..text.len() - 1].split(',').next().unwrap_or_default().trim(),
        _ => text,
    };
    let number = match inner {
        "nan" => Some(f64::NAN),
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        t => t.parse::<f64>().ok(),
    };
    Some((number, tail))
}

/// Where a value ends: the first comma outside brackets and quotes (or the end).
fn top_level_end(s: &str) -> Option<usize> {
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => return Some(i),
            _ => {}
        }
        if depth < 0 {
            return None;
        }
    }
    (quote.is_none() && depth == 0).then_some(s.len())
}

/// A step's metrics on a line, when it is TRL's line for one (it has `loss`).
pub fn metrics_line(line: &str) -> Option<TrainMetrics> {
    let pairs = python_dict(line)?;
    if !pairs.iter().any(|(k, _)| *k == "loss") {
        return None;
    }
    Some(TrainMetrics::from_pairs(pairs))
}

/// What a reader of a log remembers between lines: the global step of the last rollout line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogState {
    pub rollout_step: Option<u64>,
}

impl LogState {
    /// Reads one line: a rollout line moves the step on; TRL's line for a step answers that
    /// step's metrics (the step after the rollouts it trained on). A metrics line with no
    /// rollout before it cannot be numbered and is left out.
    pub fn line(&mut self, line: &str) -> Option<TrainPoint> {
        if let Some(step) = steps::parse_line(line) {
            if let StepKind::Rollout { global_step, .. } = step.kind {
                self.rollout_step = Some(global_step);
            }
            return None;
        }
        let metrics = metrics_line(line)?;
        Some(TrainPoint { step: self.rollout_step? + 1, metrics })
    }

    /// Every step's metrics on these lines, in order.
    pub fn lines<'a>(&mut self, lines: impl IntoIterator<Item = &'a str>) -> Vec<TrainPoint> {
        lines.into_iter().filter_map(|l| self.line(l)).collect()
    }
}
