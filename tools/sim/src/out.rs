//! What a scenario leaves behind: a table on stdout, `NAME.csv` (one row
//! per variant and second; shares as fractions), `NAME-summary.csv`
//! (variant, metric, value: what the table shows, in the same units, a
//! metric named `... %` in percent; what the tests read) and `NAME.svg` (a
//! hand-written plot: per variant, each member's traffic share and the
//! share of requests sent to failed or overloaded members).

use std::fmt::Write as _;
use std::path::Path;

use crate::model::Row;

/// One variant's run.
pub(crate) struct Run {
    /// How the table and plot name it (`max_ejected = 0.1`).
    pub(crate) variant: String,
    /// Its seconds.
    pub(crate) rows: Vec<Row>,
    /// Its summary: (metric, value), in table order.
    pub(crate) metrics: Vec<(String, f64)>,
}

/// A scenario's runs, with the moments worth marking on the plot.
pub(crate) struct Report {
    /// The subcommand's name (file names).
    pub(crate) name: &'static str,
    /// One line on what happens.
    pub(crate) title: String,
    /// Each variant.
    pub(crate) runs: Vec<Run>,
    /// (second, label) marks on the plot.
    pub(crate) events: Vec<(u64, &'static str)>,
    /// Members whose lines are drawn thick (the ones the scenario is about).
    pub(crate) highlight: Vec<usize>,
}

/// Print the table and write the three files into `dir`.
pub(crate) fn write(r: &Report, dir: &Path) -> std::io::Result<()> {
    // The CSVs are written without quoting.
    for run in &r.runs {
        assert!(!run.variant.contains(','), "a comma in {:?}", run.variant);
    }
    std::fs::create_dir_all(dir)?;
    print!("{}", table(r));
    std::fs::write(dir.join(format!("{}.csv", r.name)), csv(r))?;
    let mut s = String::from("variant,metric,value\n");
    for run in &r.runs {
        for (m, v) in &run.metrics {
            let _ = writeln!(s, "{},{},{:.4}", run.variant, m, shown(m, *v));
        }
    }
    std::fs::write(dir.join(format!("{}-summary.csv", r.name)), s)?;
    std::fs::write(dir.join(format!("{}.svg", r.name)), svg(r))?;
    Ok(())
}

/// The summary as a Markdown table: a row per variant, a column per metric.
pub(crate) fn table(r: &Report) -> String {
    let mut s = format!("\n## {}: {}\n\n", r.name, r.title);
    let Some(first) = r.runs.first() else {
        return s;
    };
    s.push_str("| variant |");
    for (m, _) in &first.metrics {
        let _ = write!(s, " {m} |");
    }
    s.push_str("\n| --- |");
    for _ in &first.metrics {
        s.push_str(" ---: |");
    }
    s.push('\n');
    for run in &r.runs {
        let _ = write!(s, "| {} |", run.variant);
        for (m, v) in &run.metrics {
            let v = shown(m, *v);
            if m.ends_with('%') {
                let _ = write!(s, " {v:.1} |");
            } else if m.ends_with("ms") || m.ends_with(" s") || m.starts_with("min ") {
                let _ = write!(s, " {v:.0} |");
            } else {
                let _ = write!(s, " {v:.2} |");
            }
        }
        s.push('\n');
    }
    s
}

/// A metric in the unit its name gives: a name ending in `%` holds a
/// fraction (0..1) and is shown, in the table and the summary CSV alike,
/// as a percentage.
fn shown(metric: &str, v: f64) -> f64 {
    if metric.ends_with('%') {
        v * 100.0
    } else {
        v
    }
}

/// Per variant and second: `share_mN`, `bad` and `slow` are fractions
/// (0..1) of the requests, as their names (no `%`) say.
fn csv(r: &Report) -> String {
    let n = r
        .runs
        .first()
        .and_then(|x| x.rows.first())
        .map_or(0, |x| x.share.len());
    let mut s = String::from("variant,t");
    for i in 0..n {
        let _ = write!(s, ",share_m{}", i + 1);
    }
    s.push_str(",bad,slow,latency_ms,usable,panic,kept_by_cap\n");
    for run in &r.runs {
        for row in &run.rows {
            let _ = write!(s, "{},{}", run.variant, row.t);
            for v in &row.share {
                let _ = write!(s, ",{v:.4}");
            }
            let _ = writeln!(
                s,
                ",{:.4},{:.4},{:.1},{},{},{}",
                row.bad, row.slow, row.latency_ms, row.usable, row.panic as u8, row.kept_by_cap
            );
        }
    }
    s
}

const COLORS: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
    "#17becf", "#393b79",
];

/// Per variant two charts side by side: members' traffic shares (left),
/// the share of requests sent to failed or overloaded members (right).
fn svg(r: &Report) -> String {
    let (cw, ch) = (400.0, 170.0);
    let (ml, mt, gap) = (48.0, 44.0, 70.0);
    let ph = ch + mt + 40.0;
    let width = ml + cw + gap + cw + 20.0;
    let height = 40.0 + ph * r.runs.len() as f64 + 30.0;
    let t_max = r
        .runs
        .iter()
        .flat_map(|x| x.rows.last())
        .map(|x| x.t)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let share_max = r
        .runs
        .iter()
        .flat_map(|x| &x.rows)
        .flat_map(|x| x.share.iter().copied())
        .fold(0.0, f64::max);
    // Round the share axis up to a tidy step.
    let share_top = [0.2, 0.4, 0.6, 0.8, 1.0]
        .into_iter()
        .find(|&v| v >= share_max)
        .unwrap_or(1.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{ml}" y="20" font-size="14" font-weight="bold">{}: {}</text>"#,
        r.name,
        esc(&r.title)
    );
    for (k, run) in r.runs.iter().enumerate() {
        let y0 = 40.0 + ph * k as f64 + mt;
        let x_left = ml;
        let x_right = ml + cw + gap;
        let _ = writeln!(
            s,
            r#"<text x="{x_left}" y="{}" font-size="12" font-weight="bold">{}</text>"#,
            y0 - 24.0,
            esc(&run.variant)
        );
        for (x0, top, label) in [
            (x_left, share_top, "traffic share per member"),
            (x_right, 1.0, "requests failed or overloaded"),
        ] {
            let _ = writeln!(
                s,
                r##"<rect x="{x0}" y="{y0}" width="{cw}" height="{ch}" fill="none" stroke="#999"/>"##
            );
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{}" fill="#444">{label}</text>"##,
                x0 + cw - 6.0 * label.len() as f64,
                y0 - 6.0
            );
            for j in 0..=4 {
                let v = top * j as f64 / 4.0;
                let y = y0 + ch - ch * j as f64 / 4.0;
                let _ = writeln!(
                    s,
                    r##"<line x1="{x0}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end" fill="#444">{:.0} %</text>"##,
                    x0 + cw,
                    x0 - 4.0,
                    y + 4.0,
                    v * 100.0
                );
            }
            for j in 0..=4 {
                let t = t_max * j as f64 / 4.0;
                let x = x0 + cw * j as f64 / 4.0;
                let _ = writeln!(
                    s,
                    r##"<text x="{x:.1}" y="{}" text-anchor="middle" fill="#444">{t:.0} s</text>"##,
                    y0 + ch + 14.0
                );
            }
            for (t, label) in &r.events {
                let x = x0 + cw * *t as f64 / t_max;
                let _ = writeln!(
                    s,
                    r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{}" stroke="#c00" stroke-dasharray="3,3"/><text x="{:.1}" y="{}" fill="#c00" font-size="10">{}</text>"##,
                    y0 + ch,
                    x + 2.0,
                    y0 + 10.0,
                    esc(label)
                );
            }
        }
        let pts = |f: &dyn Fn(&Row) -> f64, x0: f64, top: f64| -> String {
            let mut p = String::new();
            for row in &run.rows {
                let x = x0 + cw * row.t as f64 / t_max;
                let y = y0 + ch - ch * (f(row) / top).min(1.0);
                let _ = write!(p, "{x:.1},{y:.1} ");
            }
            p
        };
        let n = run.rows.first().map_or(0, |x| x.share.len());
        for i in 0..n {
            let w = if r.highlight.contains(&i) { 2.5 } else { 1.0 };
            let _ = writeln!(
                s,
                r#"<polyline fill="none" stroke="{}" stroke-width="{w}" points="{}"/>"#,
                COLORS[i % COLORS.len()],
                pts(&|row: &Row| row.share[i], x_left, share_top)
            );
        }
        let _ = writeln!(
            s,
            r##"<polyline fill="none" stroke="#d62728" stroke-width="2" points="{}"/>"##,
            pts(&|row: &Row| row.bad, x_right, 1.0)
        );
    }
    // Legend: member colours.
    let ly = height - 14.0;
    let n = r
        .runs
        .first()
        .and_then(|x| x.rows.first())
        .map_or(0, |x| x.share.len());
    for i in 0..n {
        let x = ml + 62.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{x}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="3"/><text x="{}" y="{ly}">m{}</text>"#,
            ly - 4.0,
            x + 16.0,
            ly - 4.0,
            COLORS[i % COLORS.len()],
            x + 20.0,
            i + 1
        );
    }
    s.push_str("</svg>\n");
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
