//! Training curves, one drawing for both tracks: loss, reward with its spread, and gradient norm
//! against the optimizer step, each an SVG drawn on the server from numbers with `view!` (typed and
//! escaped; no wasm: a page that follows a run is read again when more steps were logged), then
//! the numbers themselves as a table, the drawing's text alternative.

use domain::training::{TrainPoint, TrainingCurve};
use leptos::prelude::*;

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

/// A drawn coordinate, to a tenth of a unit.
fn coord(v: f64) -> String {
    format!("{v:.1}")
}

/// One panel: `line` per step, with `band` (low, high) drawn under it when given.
struct Panel {
    title: &'static str,
    class: &'static str,
    line: Vec<(u64, f64)>,
    band: Vec<(u64, f64, f64)>,
    /// The range the axis always shows (the reward's 0 to 1).
    floor: Option<(f64, f64)>,
}

impl Panel {
    /// The value axis: the range of what is drawn (with the floor's), never empty.
    fn range(&self) -> (f64, f64) {
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
        (lo, hi)
    }

    fn view(self, last_step: u64) -> impl IntoView {
        let (lo, hi) = self.range();
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
        let (x0, x1, y0, y1) = (LEFT, W - RIGHT, TOP, H - BOTTOM);
        let spread = (self.band.len() > 1).then(|| {
            let upper = self.band.iter().map(|b| format!("{},{}", coord(x(b.0)), coord(y(b.2))));
            let lower = self.band.iter().rev().map(|b| format!("{},{}", coord(x(b.0)), coord(y(b.1))));
            upper.chain(lower).collect::<Vec<_>>().join(" ")
        });
        let points: Vec<(String, String)> =
            self.line.iter().map(|(s, v)| (coord(x(*s)), coord(y(*v)))).collect();
        let line = (points.len() > 1)
            .then(|| points.iter().map(|(a, b)| format!("{a},{b}")).collect::<Vec<_>>().join(" "));
        // Dots while they can be told apart; a long run is a line.
        let dots = (points.len() <= 60).then_some(points);
        view! {
            <figure class=format!("curve {}", self.class)>
                <figcaption>{self.title}</figcaption>
                <svg viewBox=format!("0 0 {W} {H}") role="img" aria-label=described>
                    <line class="axis" x1=x0 y1=y0 x2=x0 y2=y1/>
                    <line class="axis" x1=x0 y1=y1 x2=x1 y2=y1/>
                    <text class="tick" x=x0 - 4.0 y=y0 + 8.0 text-anchor="end">{num(hi)}</text>
                    <text class="tick" x=x0 - 4.0 y=y1 text-anchor="end">{num(lo)}</text>
                    <text class="tick" x=x0 y=H - 4.0 text-anchor="start">"step 1"</text>
                    <text class="tick" x=x1 y=H - 4.0 text-anchor="end">{last_step}</text>
                    {spread.map(|points| view! { <polygon class="spread" points=points/> })}
                    {line.map(|points| view! { <polyline class="line" points=points/> })}
                    {dots.map(|dots| dots.into_iter().map(|(cx, cy)| view! { <circle cx=cx cy=cy r="2.5"/> }).collect_view())}
                </svg>
            </figure>
        }
    }
}

fn series(points: &[TrainPoint], get: impl Fn(&TrainPoint) -> Option<f64>) -> Vec<(u64, f64)> {
    points.iter().filter_map(|p| Some((p.step, get(p)?))).collect()
}

/// The curves and their table.
#[component]
pub fn TrainingCurves(curve: TrainingCurve) -> impl IntoView {
    if curve.points.is_empty() {
        let planned = curve.planned_steps.map(|p| format!(" of the {p} planned")).unwrap_or_default();
        return view! {
            <div class="training-curves"><p class="note">{format!("No optimizer step logged yet{planned}.")}</p></div>
        }
        .into_any();
    }
    let last = curve.last_step();
    let taken = curve.points.iter().map(|p| p.step).max().unwrap_or(0);
    let meta = format!(
        "{} optimizer steps logged, the latest step {taken}{}.",
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
    let panel = |title, class, line, band, floor| Panel { title, class, line, band, floor };
    let panels = [
        panel("Loss", "loss", series(p, |p| p.metrics.loss), vec![], None),
        panel("Reward (± its spread)", "reward", series(p, |p| p.metrics.reward), band, Some((0.0, 1.0))),
        panel("Gradient norm", "grad-norm", series(p, |p| p.metrics.grad_norm), vec![], Some((0.0, 0.0))),
    ];
    view! {
        <div class="training-curves">
            <p class="meta">{meta}</p>
            <div class="curves">{panels.into_iter().map(|panel| panel.view(last)).collect_view()}</div>
            <Numbers points=curve.points.clone()/>
        </div>
    }
    .into_any()
}

/// The drawing's numbers, step by step.
#[component]
fn Numbers(points: Vec<TrainPoint>) -> impl IntoView {
    let cell = |v: Option<f64>| v.map_or("–".to_string(), num);
    view! {
        <details class="curve-numbers"><summary>"The numbers, step by step"</summary>
            <table class="cards training-steps">
                <thead><tr><th scope="col">"Step"</th><th scope="col">"Loss"</th><th scope="col">"Reward"</th>
                    <th scope="col">"Spread"</th><th scope="col">"Grad norm"</th><th scope="col">"Learning rate"</th>
                    <th scope="col">"Tokens"</th></tr></thead>
                <tbody>
                    {points.into_iter().map(|p| {
                        let m = p.metrics;
                        view! {
                            <tr><td data-label="Step">{p.step}</td><td data-label="Loss">{cell(m.loss)}</td>
                                <td data-label="Reward">{cell(m.reward)}</td><td data-label="Spread">{cell(m.reward_std)}</td>
                                <td data-label="Grad norm">{cell(m.grad_norm)}</td>
                                <td data-label="Learning rate">{cell(m.learning_rate)}</td>
                                <td data-label="Tokens">{m.completions_mean_length.map_or("–".to_string(), |v| format!("{v:.0}"))}</td></tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </details>
    }
}

// Rendering to HTML is the server's (`ssr`): `cargo test --workspace` builds the app with it.
#[cfg(all(test, feature = "ssr"))]
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

    fn html(curve: TrainingCurve) -> String {
        view! { <TrainingCurves curve/> }.to_html()
    }

    #[test]
    fn the_axis_ends_at_the_planned_steps_and_the_table_says_every_number() {
        let html = html(TrainingCurve {
            planned_steps: Some(10),
            points: vec![point(1, 0.5, 0.25), point(2, 0.25, 0.5)],
        });
        assert!(html.contains(">10</text>"), "{html}");
        assert!(html.contains("2 optimizer steps logged, the latest step 2 of 10 planned"));
        let polygon = html.split("<polygon").nth(1).and_then(|p| p.split('>').next()).unwrap_or_default();
        assert!(polygon.contains("class=\"spread\""), "{html}");
        assert!(html.contains("<td data-label=\"Loss\">0.250</td>"), "{html}");
        assert!(html.contains("aria-label=\"Loss: 2 steps drawn, 0.250 at step 2\""), "{html}");
        // Step 2 of 10 sits a ninth of the way along the axis.
        let x2 = LEFT + (W - LEFT - RIGHT) / 9.0;
        assert!(html.contains(&format!("{x2:.1},")), "{html}");
    }

    #[test]
    fn nothing_logged_says_so() {
        let html = html(TrainingCurve { planned_steps: Some(4), points: vec![] });
        assert!(html.contains("No optimizer step logged yet of the 4 planned."));
        assert_eq!(num(1e-6), "1.00e-6");
        assert_eq!(num(0.0213), "0.0213");
        assert_eq!(num(412.5), "412");
    }
}
