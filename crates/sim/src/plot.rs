//! `--plot DIR`: SVG line charts of a report (traffic share, success rate, latency over
//! time), and for `--compare` the two runs side by side on the same axes, so what one
//! strategy does differently from the other is seen, not computed.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::report::Report;

type Series = Vec<(String, Vec<(f64, f64)>)>;

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// One chart's content.
struct Chart {
    file: &'static str,
    title: &'static str,
    y_label: &'static str,
    series: fn(&Report) -> Series,
}

fn share(r: &Report) -> Series {
    let mut out: Series = Vec::new();
    let names: Vec<String> = match r.series.first() {
        Some(p) if !p.endpoints.is_empty() => p.endpoints.keys().cloned().collect(),
        Some(p) => p.groups.keys().cloned().collect(),
        None => Vec::new(),
    };
    let by_endpoint = r.series.first().is_some_and(|p| !p.endpoints.is_empty());
    for name in names {
        // An interval with no request has no share (the last one may be empty): no point,
        // rather than a drop to zero.
        let points = r
            .series
            .iter()
            .filter(|p| p.requests > 0)
            .map(|p| {
                let v = if by_endpoint {
                    p.endpoints.get(&name)
                } else {
                    p.groups.get(&name)
                };
                (p.t_s, 100.0 * v.copied().unwrap_or(0.0))
            })
            .collect();
        out.push((name, points));
    }
    out
}

fn success(r: &Report) -> Series {
    let points = r
        .series
        .iter()
        .filter(|p| p.requests > 0)
        .map(|p| (p.t_s, 100.0 * p.success_rate))
        .collect();
    vec![("success %".into(), points)]
}

fn latency(r: &Report) -> Series {
    let pick = |f: fn(&crate::report::Point) -> f64| {
        r.series
            .iter()
            .filter(|p| p.requests > 0)
            .map(|p| (p.t_s, f(p)))
            .collect()
    };
    vec![
        ("p50 ms".into(), pick(|p| p.p50_ms)),
        ("p99 ms".into(), pick(|p| p.p99_ms)),
    ]
}

const CHARTS: [Chart; 3] = [
    Chart {
        file: "share",
        title: "traffic share",
        y_label: "% of attempts",
        series: share,
    },
    Chart {
        file: "success",
        title: "success rate",
        y_label: "% of calls",
        series: success,
    },
    Chart {
        file: "latency",
        title: "latency",
        y_label: "ms",
        series: latency,
    },
];

fn y_max(all: &[&Series]) -> f64 {
    let max = all
        .iter()
        .flat_map(|s| s.iter())
        .flat_map(|(_, pts)| pts.iter().map(|(_, y)| *y))
        .fold(0.0_f64, f64::max);
    if max <= 0.0 {
        1.0
    } else {
        max * 1.05
    }
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y_label: &str,
    series: &Series,
    x_max: f64,
    y_max: f64,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("plot: {e}");
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(52)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("virtual time (s)")
        .y_desc(y_label)
        .draw()
        .map_err(err)?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// Writes `DIR/share.svg`, `success.svg`, `latency.svg`; returns the files.
pub fn single(dir: &Path, r: &Report) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for c in &CHARTS {
        let s = (c.series)(r);
        let file = dir.join(format!("{}.svg", c.file));
        let root = SVGBackend::new(&file, (900, 420)).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
        draw(&root, c.title, c.y_label, &s, r.duration_s, y_max(&[&s]))?;
        root.present()
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        drop(root);
        files.push(file);
    }
    Ok(files)
}

/// Writes `DIR/compare-share.svg`, ...: `a` left, `b` right, on the same axes.
pub fn compare(dir: &Path, a: (&str, &Report), b: (&str, &Report)) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for c in &CHARTS {
        let (sa, sb) = ((c.series)(a.1), (c.series)(b.1));
        let y = y_max(&[&sa, &sb]);
        let x = a.1.duration_s.max(b.1.duration_s);
        let file = dir.join(format!("compare-{}.svg", c.file));
        {
            let root = SVGBackend::new(&file, (1400, 420)).into_drawing_area();
            root.fill(&WHITE)
                .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
            let (left, right) = root.split_horizontally(700);
            draw(
                &left,
                &format!("{}: {}", a.0, c.title),
                c.y_label,
                &sa,
                x,
                y,
            )?;
            draw(
                &right,
                &format!("{}: {}", b.0, c.title),
                c.y_label,
                &sb,
                x,
                y,
            )?;
            root.present()
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        }
        files.push(file);
    }
    Ok(files)
}
