//! `mmac report`: the accuracy of instructions on GEMM-style accumulations over K against
//! the exact result ([`mmac_runtime::accuracy`]): a table or JSON rows on stdout, and a
//! plot of error and bias against K (plotters; SVG or PNG by the file's extension).

use super::common::{
    EXIT_FAILED, EXIT_OK, EXIT_USAGE, Halt, Outcome, create_output, instruction, load, progress_bar,
};
use mmac_compiler::Checked;
use mmac_compiler::engine::{Choice, Engine};
use mmac_runtime::accuracy::{self, Distribution, ReportOptions, Row};
use mmac_runtime::output::Output;
use mmac_runtime::specs::LoadedSpec;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The arguments of `mmac report`.
pub struct ReportArgs<'a> {
    pub file: &'a Path,
    pub instr: &'a str,
    /// Further instructions as (file, instruction).
    pub against: Vec<(PathBuf, String)>,
    pub dist: &'a str,
    pub range: Option<&'a str>,
    pub ks: Vec<usize>,
    pub samples: usize,
    pub seed: u64,
    pub plot: Option<&'a Path>,
    pub json: bool,
    /// Synthesize each instruction with Yosys ([`mmac_runtime::cost`]).
    pub cost: bool,
}

fn usage(message: String) -> Halt {
    eprintln!("error: {message}");
    Halt::Exit(EXIT_USAGE)
}

fn parse_range(text: &str) -> Result<(f64, f64), String> {
    let parts: Vec<&str> = text.split(',').collect();
    let nums: Vec<Option<f64>> = parts.iter().map(|p| p.trim().parse::<f64>().ok()).collect();
    match nums.as_slice() {
        [Some(lo), Some(hi)] if lo < hi && lo.is_finite() && hi.is_finite() => Ok((*lo, *hi)),
        _ => Err(format!(
            "--range {text}: expected LO,HI with finite LO < HI (e.g. --range -1,1)"
        )),
    }
}

/// Which image format a plot path asks for.
enum PlotKind {
    Svg,
    Png,
}

fn plot_kind(path: &Path) -> Result<PlotKind, String> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("svg") => Ok(PlotKind::Svg),
        Some("png") => Ok(PlotKind::Png),
        _ => Err(format!(
            "--plot {}: the file must end in .svg or .png",
            path.display()
        )),
    }
}

pub fn report(args: &ReportArgs, color: bool) -> Outcome {
    let range = args.range.map(parse_range).transpose().map_err(usage)?;
    let distribution = Distribution::parse(args.dist, range).map_err(usage)?;
    if args.ks.is_empty() {
        return Err(usage("--k needs at least one length".into()));
    }
    let options = ReportOptions {
        distribution,
        ks: args.ks.clone(),
        samples: args.samples,
        seed: args.seed,
    };
    accuracy::check_sizes(&options).map_err(usage)?;
    let plot = args
        .plot
        .map(|p| plot_kind(p).map(|k| (p, k)))
        .transpose()
        .map_err(usage)?;
    // the plot's file is checked (writable, not an input) before any work
    let mut inputs: Vec<(&str, &Path)> = vec![("FILE", args.file)];
    inputs.extend(args.against.iter().map(|(f, _)| ("--against", f.as_path())));
    let plot = match plot {
        Some((path, kind)) => Some((path, kind, create_output(path, &inputs)?)),
        None => None,
    };
    let mut specs = vec![load(args.file, color)?];
    for (file, _) in &args.against {
        specs.push(load(file, color)?);
    }
    let mut chosen = vec![instruction(&specs[0], args.instr)?];
    for (spec, (_, name)) in specs[1..].iter().zip(&args.against) {
        chosen.push(instruction(spec, name)?);
    }
    for inst in chosen.iter().map(|c| c.instruction()) {
        accuracy::reportable(inst).map_err(usage)?;
        if let Some(s) = inst.sparsity {
            eprintln!(
                "note: `{}` is sparse ({s} over selected): K counts its selected products, the inputs of the dense unit",
                inst.name
            );
        }
        if let Some(kt) = args.ks.iter().find(|&&kt| kt == 0 || kt % inst.k() != 0) {
            return Err(usage(format!(
                "--k {kt} is not a positive multiple of `{}`'s k = {}",
                inst.name,
                inst.k()
            )));
        }
    }
    let labels = labels(&specs, &chosen);
    // each instruction's gate count, before the sampling: a missing Yosys stops early
    let mut costs = vec![];
    if args.cost {
        for (checked, label) in chosen.iter().zip(&labels) {
            match mmac_runtime::cost::synthesize(*checked) {
                Ok(c) => costs.push((label.clone(), c)),
                Err(e) => {
                    eprintln!("error: --cost: {e}");
                    return Ok(EXIT_USAGE);
                }
            }
        }
    }
    let total = (chosen.len() as u64)
        .saturating_mul(args.ks.len() as u64)
        .saturating_mul(args.samples as u64);
    let bar = progress_bar(total, "samples", true);
    let progress = |n: usize| bar.inc(n as u64);
    let mut rows: Vec<Row> = vec![];
    for ((checked, spec), label) in chosen.iter().zip(&specs).zip(&labels) {
        // the JIT when it lowers the instruction, else the interpreter
        let engine = Engine::new(*checked, Choice::OPTIMISED);
        let measured = accuracy::measure(&engine, &options, &progress);
        match measured {
            Ok(r) => rows.extend(r.into_iter().map(|mut r| {
                r.label = label.clone();
                r.arch = spec.spec().arch.clone();
                r.file = spec.path.display().to_string();
                r
            })),
            Err(e) => {
                bar.finish_and_clear();
                eprintln!("error: {e}");
                return Ok(EXIT_FAILED);
            }
        }
    }
    bar.finish_and_clear();
    for caveat in rows.iter().filter_map(Row::caveat) {
        eprintln!("warning: {caveat}");
    }
    if let Some((path, kind, output)) = plot {
        let title = format!(
            "{} inputs, {} samples per K",
            distribution.describe(),
            args.samples
        );
        if let Err(e) = write_plot(output, kind, &rows, &title) {
            eprintln!("error: --plot {}: {e}", path.display());
            return Ok(EXIT_USAGE);
        }
    }
    let mut out = super::common::stdout();
    if args.json {
        let mut v = serde_json::json!({ "rows": rows });
        if args.cost {
            v["costs"] = costs
                .iter()
                .map(|(label, c)| {
                    let mut x = serde_json::to_value(c).unwrap_or_default();
                    x["label"] = serde_json::json!(label);
                    x["cells_by_kind"] = c
                        .cells_by_kind
                        .iter()
                        .map(|(k, n)| (k.clone(), serde_json::json!(n)))
                        .collect::<serde_json::Map<_, _>>()
                        .into();
                    x
                })
                .collect();
        }
        writeln!(out, "{v}")?;
    } else {
        for (label, c) in &costs {
            writeln!(
                out,
                "cost of {label} (Yosys, generic gates; not silicon area): {}",
                c.summary()
            )?;
        }
        writeln!(
            out,
            "{} inputs rounded to nearest into the input formats; {} samples per K, seed {}",
            distribution.describe(),
            args.samples,
            args.seed
        )?;
        let w = rows
            .iter()
            .map(|r| r.label.len())
            .max()
            .unwrap_or(0)
            .max("instruction".len());
        writeln!(
            out,
            "{:<w$} {:>5} {:>11} {:>11} {:>11} {:>11} {:>24} {:>7} {:>8}",
            "instruction",
            "K",
            "mean |abs|",
            "max |abs|",
            "mean |rel|",
            "max |rel|",
            "bias (95% CI)",
            "correct",
            "faithful"
        )?;
        for r in &rows {
            writeln!(
                out,
                "{:<w$} {:>5} {:>11.3e} {:>11.3e} {:>11.3e} {:>11.3e} {:>24} {:>6.1}% {:>7.1}%",
                r.label,
                r.k,
                r.mean_abs_error,
                r.max_abs_error,
                r.mean_rel_error,
                r.max_rel_error,
                format!(
                    "{:.2e} [{:.1e}, {:.1e}]",
                    r.bias, r.bias_ci95[0], r.bias_ci95[1]
                ),
                100.0 * r.correctly_rounded,
                100.0 * r.faithful
            )?;
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// How each compared instruction is named in the table, the legend and the JSON
/// `label`: its name, or `arch name` where names repeat, or `file name` where those
/// repeat too.
fn labels(specs: &[LoadedSpec], chosen: &[Checked]) -> Vec<String> {
    let count = |key: &dyn Fn(usize) -> String, i: usize| {
        (0..chosen.len()).filter(|&j| key(j) == key(i)).count()
    };
    let name = |i: usize| chosen[i].name().to_string();
    let arch = |i: usize| format!("{} {}", specs[i].spec().arch, chosen[i].name());
    let file = |i: usize| format!("{} {}", specs[i].path.display(), chosen[i].name());
    (0..chosen.len())
        .map(|i| {
            if count(&name, i) == 1 {
                name(i)
            } else if count(&arch, i) == 1 {
                arch(i)
            } else if count(&file, i) == 1 {
                file(i)
            } else {
                format!("{} (#{})", file(i), i + 1)
            }
        })
        .collect()
}

/// Draw the plot into a temporary file (plotters writes files by path), then put its
/// bytes in place through `output`.
fn write_plot(output: Output, kind: PlotKind, rows: &[Row], title: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join(match kind {
        PlotKind::Svg => "plot.svg",
        PlotKind::Png => "plot.png",
    });
    match kind {
        PlotKind::Svg => draw(
            SVGBackend::new(&path, (960, 900)).into_drawing_area(),
            rows,
            title,
        ),
        PlotKind::Png => draw(
            BitMapBackend::new(&path, (960, 900)).into_drawing_area(),
            rows,
            title,
        ),
    }
    .map_err(|e| e.to_string())?;
    let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
    output.finish_bytes(&bytes).map_err(|e| e.to_string())
}

/// The instructions in the order of their first row.
fn series(rows: &[Row]) -> Vec<(&str, Vec<&Row>)> {
    let mut out: Vec<(&str, Vec<&Row>)> = vec![];
    for r in rows {
        match out.iter_mut().find(|(n, _)| *n == r.label) {
            Some((_, v)) => v.push(r),
            None => out.push((&r.label, vec![r])),
        }
    }
    out
}

/// Two panels: mean and max relative error against K (log-log), and the bias with its
/// 95% confidence interval against K (log K).
fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    rows: &[Row],
    title: &str,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(e)?;
    let (upper, lower) = root.split_vertically(430);
    let kmin = rows.iter().map(|r| r.k).min().unwrap_or(1) as f64;
    let kmax = rows.iter().map(|r| r.k).max().unwrap_or(2) as f64;
    let (x0, x1) = (kmin / 1.5, kmax * 1.5);
    let positive: Vec<f64> = rows
        .iter()
        .flat_map(|r| [r.mean_rel_error, r.max_rel_error])
        .filter(|v| *v > 0.0)
        .collect();
    let ylo = positive.iter().copied().fold(f64::INFINITY, f64::min);
    let yhi = positive.iter().copied().fold(0.0, f64::max);
    let (ylo, yhi) = if positive.is_empty() {
        (1e-10, 1.0)
    } else {
        (ylo / 3.0, yhi * 3.0)
    };
    let floor = ylo;
    let all = series(rows);
    let colour = |i: usize| Palette99::pick(i).to_rgba();

    let mut chart = ChartBuilder::on(&upper)
        .caption(
            "relative error |result - exact| / |exact| (solid: mean, dashed: max)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((x0..x1).log_scale(), (ylo..yhi).log_scale())
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("K (dot-product length)")
        .y_desc("relative error")
        .y_label_formatter(&|v| format!("{v:.0e}"))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(e)?;
    for (i, (name, rs)) in all.iter().enumerate() {
        let c = colour(i);
        let mean: Vec<(f64, f64)> = rs
            .iter()
            .map(|r| (r.k as f64, r.mean_rel_error.max(floor)))
            .collect();
        let max: Vec<(f64, f64)> = rs
            .iter()
            .map(|r| (r.k as f64, r.max_rel_error.max(floor)))
            .collect();
        chart
            .draw_series(LineSeries::new(mean.clone(), c.stroke_width(2)))
            .map_err(e)?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(mean.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(e)?;
        chart
            .draw_series(DashedLineSeries::new(max, 6, 4, c.stroke_width(1)))
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;

    let reach = rows
        .iter()
        .flat_map(|r| [r.bias_ci95[0].abs(), r.bias_ci95[1].abs(), r.bias.abs()])
        .fold(0.0, f64::max);
    let reach = if reach > 0.0 { reach * 1.2 } else { 1e-9 };
    let mut chart = ChartBuilder::on(&lower)
        .caption(
            "bias: mean of (result - exact) / |exact|, with 95% confidence interval",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((x0..x1).log_scale(), -reach..reach)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("K (dot-product length)")
        .y_desc("bias")
        .y_label_formatter(&|v| format!("{v:.1e}"))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(e)?;
    chart
        .draw_series(LineSeries::new(vec![(x0, 0.0), (x1, 0.0)], BLACK.mix(0.4)))
        .map_err(e)?;
    for (i, (name, rs)) in all.iter().enumerate() {
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(
                rs.iter().map(|r| (r.k as f64, r.bias)),
                c.stroke_width(2),
            ))
            .map_err(e)?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(rs.iter().map(|r| {
                ErrorBar::new_vertical(
                    r.k as f64,
                    r.bias_ci95[0],
                    r.bias,
                    r.bias_ci95[1],
                    c.stroke_width(1),
                    8,
                )
            }))
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}
