//! Percentile charts as SVG (plotters' SVG backend, which writes text as SVG text and so needs
//! no font library): panels side by side, each a latency in milliseconds (log scale) over the
//! percentiles 1 to 99, one line per side of a run.

use std::path::Path;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

/// One line: a side's name and its latency in milliseconds at each percentile.
#[derive(Debug, Clone)]
pub struct Curve {
    /// The legend's name.
    pub name: String,
    /// (percentile, milliseconds), by percentile.
    pub points: Vec<(f64, f64)>,
}

/// One panel: a title and its lines.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Shown above the panel.
    pub title: String,
    /// Its lines, each in its own colour, in legend order.
    pub curves: Vec<Curve>,
}

/// The colours of the lines, in turn.
const COLOURS: [RGBColor; 4] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
];

/// The SVG text of `panels` side by side under `title`.
pub fn svg(title: &str, panels: &[Panel]) -> Result<String> {
    let e = |e: &dyn std::fmt::Display| anyhow!("chart: {e}");
    let mut out = String::new();
    {
        let width = 560 * panels.len().max(1) as u32;
        let root = SVGBackend::with_string(&mut out, (width, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let root = root.titled(title, ("sans-serif", 18)).map_err(|x| e(&x))?;
        let areas = root.split_evenly((1, panels.len().max(1)));
        for (panel, area) in panels.iter().zip(&areas) {
            let ys = panel
                .curves
                .iter()
                .flat_map(|c| c.points.iter().map(|p| p.1))
                .filter(|y| y.is_finite() && *y > 0.0);
            let (lo, hi) = ys.fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(y), hi.max(y)));
            let (lo, hi) = if lo <= hi {
                (lo / 1.5, hi * 1.5)
            } else {
                (0.1, 10.0)
            };
            let mut chart = ChartBuilder::on(area)
                .caption(&panel.title, ("sans-serif", 15))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(56)
                .build_cartesian_2d(0f64..100f64, (lo..hi).log_scale())
                .map_err(|x| e(&x))?;
            chart
                .configure_mesh()
                .x_desc("percentile")
                .y_desc("ms (log scale)")
                .draw()
                .map_err(|x| e(&x))?;
            for (curve, colour) in panel.curves.iter().zip(COLOURS.iter().cycle()) {
                let points = curve
                    .points
                    .iter()
                    .copied()
                    .filter(|(_, y)| y.is_finite() && *y > 0.0);
                chart
                    .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                    .map_err(|x| e(&x))?
                    .label(&curve.name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                    });
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|x| e(&x))?;
        }
        root.present().map_err(|x| e(&x))?;
    }
    Ok(out)
}

/// Writes [`svg`] to `path`.
pub fn write(path: &Path, title: &str, panels: &[Panel]) -> Result<()> {
    std::fs::write(path, svg(title, panels)?).map_err(|x| anyhow!("{}: {x}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_panel_and_curve_is_drawn_and_named() {
        let curve = |name: &str, k: f64| Curve {
            name: name.into(),
            points: (1..100).map(|p| (f64::from(p), k * f64::from(p))).collect(),
        };
        let text = svg(
            "run",
            &[
                Panel {
                    title: "admission".into(),
                    curves: vec![curve("ours", 0.1), curve("theirs", 0.3)],
                },
                Panel {
                    title: "start".into(),
                    curves: vec![curve("ours", 10.0), curve("theirs", f64::NAN)],
                },
            ],
        )
        .unwrap();
        for word in ["admission", "start", "ours", "theirs", "percentile"] {
            assert!(text.contains(word), "{word}");
        }
        // Three lines with points (a curve of NaN draws none) and a legend mark for each curve.
        assert_eq!(text.matches("stroke-width=\"2\"").count(), 3 + 4, "{text}");
    }
}
