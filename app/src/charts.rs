//! Training curves, one drawing for both tracks: loss, reward with its spread, and gradient norm
//! against the optimizer step, each an SVG written on the server from numbers (no wasm: a page
//! that follows a run is read again when more steps were logged), then the numbers themselves as
//! a table, the drawing's text alternative.

use std::fmt::Write;

use domain::training::{TrainPoint, TrainingCurve};

const W: f64 = 300.0;
const H: f64 = 150.0;
/// Room for the axis labels.
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 20.0;
const TOP: f64 = 10.0;
const RIGHT: f64 = 10.0;

/// A value to three significant figures (losses are small, learning rates smaller).
fn num(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 8) as usize;
    if v.abs() < 1e-3 {
        format!("{v:.2e}")
    } else {
        format!("{v:.digits$}")
    }
}

/// One panel: `line` per step, with `band` (low, high) drawn under it when given.
struct Panel<'a> {
    title: &'a str,
    class: &'a str,
    line: Vec<(u64, f64)>,
    band: Vec<(u64, f64, f64)>,
    /// The range the axis always shows (the reward's 0 to 1).
    floor: Option<(f64, f64)>,
}

impl Panel<'_> {
    fn svg(&self, last_step: u64, out: &mut String) {
        let values = self.line.iter().map(|p| p.1).chain(self.band.iter().flat_map(|b| [b.1, b.2]));
        let (mut lo, mut hi) =
            values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
        if let Some((f_lo, f_hi)) = self.floor {
            (lo, hi) = (lo.min(f_lo), hi.max(f_hi));
        }
        if !lo.is_finite() || !hi.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        if hi - lo < 1e-12 {
            (lo, hi) = (lo - 0.5_f64.max(lo.abs() * 0.1), hi + 0.5_f64.max(hi.abs() * 0.1));
        }
        let x = |step: u64| {
            let span = (last_step.max(2) - 1) as f64;
            LEFT + (step.saturating_sub(1) as f64 / span).min(1.0) * (W - LEFT - RIGHT)
        };
        let y = |v: f64| TOP + (hi - v) / (hi - lo) * (H - TOP - BOTTOM);
        let described = match self.line.last() {
            Some((step, v)) => {
                format!("{}: {} steps drawn, {} at step {step}", self.title, self.line.len(), num(*v))
            }
            None => format!("{}: nothing logged yet", self.title),
        };
        let _ = write!(
            out,
            "<figure class=\"curve {}\"><figcaption>{}</figcaption><svg viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{described}\">",
            self.class, self.title
        );
        let (x0, x1, y0, y1) = (LEFT, W - RIGHT, TOP, H - BOTTOM);
        let _ = write!(
            out,
            "<line class=\"axis\" x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\"/><line class=\"axis\" x1=\"{x0}\" y1=\"{y1}\" x2=\"{x1}\" y2=\"{y1}\"/>\
             <text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <text class=\"tick\" x=\"{x0}\" y=\"{}\" text-anchor=\"start\">step 1</text><text class=\"tick\" x=\"{x1}\" y=\"{}\" text-anchor=\"end\">{last_step}</text>",
            x0 - 4.0, y0 + 8.0, num(hi), x0 - 4.0, y1, num(lo), H - 4.0, H - 4.0
        );
        if self.band.len() > 1 {
            let upper = self.band.iter().map(|b| format!("{:.1},{:.1}", x(b.0), y(b.2)));
            let lower = self.band.iter().rev().map(|b| format!("{:.1},{:.1}", x(b.0), y(b.1)));
            let points: Vec<String> = upper.chain(lower).collect();
            let _ = write!(out, "<polygon class=\"spread\" points=\"{}\"/>", points.join(" "));
        }
        let points: Vec<String> =
            self.line.iter().map(|(s, v)| format!("{:.1},{:.1}", x(*s), y(*v))).collect();
        if points.len() > 1 {
            let _ = write!(out, "<polyline class=\"line\" points=\"{}\"/>", points.join(" "));
        }
        // Dots while they can be told apart; a long run is a line.
        if points.len() <= 60 {
            for p in &points {
                let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
                let _ = write!(out, "<circle cx=\"{cx}\" cy=\"{cy}\" r=\"2.5\"/>");
            }
        }
        out.push_str("</svg></figure>");
    }
}

fn series(points: &[TrainPoint], get: impl Fn(&TrainPoint) -> Option<f64>) -> Vec<(u64, f64)> {
    points.iter().filter_map(|p| Some((p.step, get(p)?))).collect()
}

/// The curves and their table, as markup.
pub fn training_curves_html(curve: &TrainingCurve) -> String {
    let mut out = String::from("<div class=\"training-curves\">");
    if curve.points.is_empty() {
        let planned = curve.planned_steps.map(|p| format!(" of the {p} planned")).unwrap_or_default();
        let _ = write!(out, "<p class=\"note\">No optimizer step logged yet{planned}.</p></div>");
        return out;
    }
    let last = curve.last_step();
    let taken = curve.points.iter().map(|p| p.step).max().unwrap_or(0);
    let _ = write!(
        out,
        "<p class=\"meta\">{} optimizer steps logged, the latest step {taken}{}.</p><div class=\"curves\">",
        curve.points.len(),
        curve.planned_steps.map(|p| format!(" of {p} planned (the axis ends there)")).unwrap_or_default()
    );
    let p = &curve.points;
    let band = p
        .iter()
        .filter_map(|p| {
            let (r, sd) = (p.metrics.reward?, p.metrics.reward_std?);
            Some((p.step, r - sd, r + sd))
        })
        .collect();
    let panels = [
        Panel {
            title: "Loss",
            class: "loss",
            line: series(p, |p| p.metrics.loss),
            band: vec![],
            floor: None,
        },
        Panel {
            title: "Reward (± its spread)",
            class: "reward",
            line: series(p, |p| p.metrics.reward),
            band,
            floor: Some((0.0, 1.0)),
        },
        Panel {
            title: "Gradient norm",
            class: "grad-norm",
            line: series(p, |p| p.metrics.grad_norm),
            band: vec![],
            floor: Some((0.0, 0.0)),
        },
    ];
    for panel in &panels {
        panel.svg(last, &mut out);
    }
    out.push_str("</div>");
    table(p, &mut out);
    out.push_str("</div>");
    out
}

/// The drawing's numbers, step by step.
fn table(points: &[TrainPoint], out: &mut String) {
    let cell = |v: Option<f64>| v.map_or("–".to_string(), num);
    out.push_str(
        "<details class=\"curve-numbers\"><summary>The numbers, step by step</summary><table class=\"cards training-steps\">\
         <thead><tr><th scope=\"col\">Step</th><th scope=\"col\">Loss</th><th scope=\"col\">Reward</th><th scope=\"col\">Spread</th>\
         <th scope=\"col\">Grad norm</th><th scope=\"col\">Learning rate</th><th scope=\"col\">Tokens</th></tr></thead><tbody>",
    );
    for p in points {
        let m = &p.metrics;
        let _ = write!(
            out,
            "<tr><td data-label=\"Step\">{}</td><td data-label=\"Loss\">{}</td><td data-label=\"Reward\">{}</td><td data-label=\"Spread\">{}</td>\
             <td data-label=\"Grad norm\">{}</td><td data-label=\"Learning rate\">{}</td><td data-label=\"Tokens\">{}</td></tr>",
            p.step,
            cell(m.loss),
            cell(m.reward),
            cell(m.reward_std),
            cell(m.grad_norm),
            cell(m.learning_rate),
            m.completion_length.map_or("–".to_string(), |v| format!("{v:.0}")),
        );
    }
    out.push_str("</tbody></table></details>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::training::TrainMetrics;

    fn point(step: u64, loss: f64, reward: f64) -> TrainPoint {
        TrainPoint {
            step,
            metrics: TrainMetrics {
                loss: Some(loss),
                reward: Some(reward),
                reward_std: Some(0.25),
                ..Default::default()
            },
        }
    }

    #[test]
    fn the_axis_ends_at_the_planned_steps_and_the_table_says_every_number() {
        let curve =
            TrainingCurve { planned_steps: Some(10), points: vec![point(1, 0.5, 0.25), point(2, 0.25, 0.5)] };
        let html = training_curves_html(&curve);
        assert!(html.contains(">10</text>"), "{html}");
        assert!(html.contains("2 optimizer steps logged, the latest step 2 of 10 planned"));
        assert!(html.contains("<polygon class=\"spread\""));
        assert!(html.contains("<td data-label=\"Loss\">0.250</td>"), "{html}");
        assert!(html.contains("aria-label=\"Loss: 2 steps drawn, 0.250 at step 2\""), "{html}");
        // Step 2 of 10 sits a ninth of the way along the axis.
        let x2 = LEFT + (W - LEFT - RIGHT) / 9.0;
        assert!(html.contains(&format!("{x2:.1},")), "{html}");
    }

    #[test]
    fn nothing_logged_says_so() {
        let html = training_curves_html(&TrainingCurve { planned_steps: Some(4), points: vec![] });
        assert!(html.contains("No optimizer step logged yet of the 4 planned."));
        assert_eq!(num(1e-6), "1.00e-6");
        assert_eq!(num(0.0213), "0.0213");
        assert_eq!(num(412.5), "412");
    }
}
