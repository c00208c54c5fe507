//! `cargo xtask instructions`: instructions per review of the in-process paths
//! (`instructions::PATHS`), counted by callgrind on the `quick-release` build, compared with the
//! committed `dev/instructions/baseline.json`. More than [`TOLERANCE`] above a baseline
//! fails; `--update` writes the new counts as the baseline.
//!
//! Counted with valgrind directly rather than a harness crate (iai-callgrind needs its own
//! runner binary at the matching version, installed separately): each path runs twice, with
//! [`SHORT`] and [`LONG`] reviews, and the difference divided by the extra reviews is the cost
//! of one review, start-up and the warm-up answer cancelled out. Instruction counts do not
//! depend on the machine's load, so the guard is stable where wall-clock time is not.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result, bail};

/// Allowed growth over the baseline.
pub const TOLERANCE: f64 = 0.10;
const SHORT: u64 = 20;
const LONG: u64 = 220;

/// One row of the table.
pub struct Row {
    /// Path name.
    pub name: &'static str,
    /// Instructions per review now.
    pub now: u64,
    /// The committed figure, if any.
    pub baseline: Option<u64>,
}

impl Row {
    fn growth(&self) -> Option<f64> {
        self.baseline
            .filter(|b| *b > 0)
            .map(|b| self.now as f64 / b as f64 - 1.0)
    }
}

/// Counts every path with the `review-loop` binary in `bin_dir`, under `valgrind` from PATH.
pub fn measure(root: &Path, bin_dir: &Path) -> Result<Vec<Row>> {
    let baseline = read_baseline(root)?;
    let bin = bin_dir.join("review-loop");
    let out_dir = root.join("target/instructions");
    std::fs::create_dir_all(&out_dir)?;
    let mut rows = Vec::new();
    for p in instructions::PATHS {
        let count = |n: u64| -> Result<u64> {
            let out = out_dir.join(format!("callgrind.{}.{n}", slug(p.name)));
            // The services' malloc tuning, set here: review-loop would otherwise execute itself
            // again to get it, and callgrind does not follow an exec.
            let status = Command::new("valgrind")
                .env(
                    "GLIBC_TUNABLES",
                    admission_kit::server::trim::MALLOC_TUNABLES,
                )
                .args(["--tool=callgrind", "--quiet"])
                .arg(format!("--callgrind-out-file={}", out.display()))
                .arg(&bin)
                .args(
                    p.served
                        .map(|mode| ["--served", mode])
                        .into_iter()
                        .flatten(),
                )
                .args([p.service, p.path])
                .arg(root.join(p.body))
                .arg(n.to_string())
                .args(p.state.map(|f| root.join(f)))
                .status()
                .context("valgrind (apt install valgrind)")?;
            if !status.success() {
                bail!("{}: review-loop under callgrind failed ({status})", p.name);
            }
            total(&std::fs::read_to_string(&out)?)
                .with_context(|| format!("no totals in {}", out.display()))
        };
        let (short, long) = (count(SHORT)?, count(LONG)?);
        let now = long.saturating_sub(short) / (LONG - SHORT);
        rows.push(Row {
            name: p.name,
            now,
            baseline: baseline.get(p.name).copied(),
        });
    }
    Ok(rows)
}

/// The table, and the rows that grew beyond the tolerance or have no baseline.
pub fn report(rows: &[Row]) -> (String, Vec<String>) {
    let mut table =
        String::from("| path | instructions per review | baseline | change |\n|---|---|---|---|\n");
    let mut failed = Vec::new();
    for r in rows {
        let change = r
            .growth()
            .map_or("no baseline".to_owned(), |g| format!("{:+.1} %", g * 100.0));
        table.push_str(&format!(
            "| {} | {} | {} | {change} |\n",
            r.name,
            r.now,
            r.baseline.map_or("–".to_owned(), |b| b.to_string())
        ));
        match r.growth() {
            None => failed.push(format!("{}: no baseline (run with --update)", r.name)),
            Some(g) if g > TOLERANCE => failed.push(format!(
                "{}: {} instructions per review, {:+.1} % over the baseline {}",
                r.name,
                r.now,
                g * 100.0,
                r.baseline.unwrap_or(0)
            )),
            _ => {}
        }
    }
    (table, failed)
}

/// Writes the counts as the new baseline.
pub fn write_baseline(root: &Path, rows: &[Row]) -> Result<()> {
    let map: BTreeMap<&str, u64> = rows.iter().map(|r| (r.name, r.now)).collect();
    let path = instructions::baseline_file(root);
    std::fs::write(&path, serde_json::to_string_pretty(&map)? + "\n")
        .with_context(|| path.display().to_string())
}

fn read_baseline(root: &Path) -> Result<BTreeMap<String, u64>> {
    let path = instructions::baseline_file(root);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).with_context(|| path.display().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(e).with_context(|| path.display().to_string()),
    }
}

/// The `totals:` (or `summary:`) line of a callgrind output file: instructions executed.
fn total(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn slug(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_are_read_and_growth_judged() {
        assert_eq!(
            total("events: Ir\nsummary: 7648662\ntotals: 7648662\n"),
            Some(7648662)
        );
        assert_eq!(total("events: Ir\n"), None);
        let rows = [
            Row {
                name: "a",
                now: 109,
                baseline: Some(100),
            },
            Row {
                name: "b",
                now: 111,
                baseline: Some(100),
            },
            Row {
                name: "c",
                now: 5,
                baseline: None,
            },
        ];
        let (table, failed) = report(&rows);
        assert!(table.contains("| a | 109 | 100 | +9.0 % |"), "{table}");
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(failed[0].starts_with("b: 111 instructions per review, +11.0 %"));
    }
}
