//! A CronJob's schedule as the API server parses it: robfig/cron v3's standard parser (five
//! fields, or a descriptor), after refusing a `TZ=` prefix.
//!
//! Hand-written: the `cron` and `croner` crates parse other dialects (seconds fields, `L`, `W`,
//! `#`, day-of-week 7) and refuse or accept differently from robfig's parser, whose exact
//! acceptance is the fact to reproduce; the grammar is a page.

use admission_compat::go::{GoDuration, atoi};
use serde_json::Value;

use super::{Finding, finding, quoted};

/// One field's bounds and names.
struct Bounds {
    min: i64,
    max: i64,
    names: &'static [&'static str],
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

const FIELDS: [Bounds; 5] = [
    Bounds {
        min: 0,
        max: 59,
        names: &[],
    },
    Bounds {
        min: 0,
        max: 23,
        names: &[],
    },
    Bounds {
        min: 1,
        max: 31,
        names: &[],
    },
    Bounds {
        min: 1,
        max: 12,
        names: &MONTHS,
    },
    Bounds {
        min: 0,
        max: 6,
        names: &DAYS,
    },
];

/// robfig's `mustParseInt`: `strconv.Atoi`, and no negative numbers.
fn int(expr: &str) -> Result<i64, String> {
    let n = atoi(expr).map_err(|e| format!("failed to parse int from {expr}: {e}"))?;
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {expr}"));
    }
    Ok(n)
}

fn int_or_name(expr: &str, b: &Bounds) -> Result<i64, String> {
    if let Some(i) = b.names.iter().position(|n| n.eq_ignore_ascii_case(expr)) {
        // Months count from 1, days from 0.
        return Ok(i as i64 + b.min);
    }
    int(expr)
}

/// One comma-separated part of a field, robfig's `getRange`.
fn range(expr: &str, b: &Bounds) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let (start, mut end) = if matches!(low_and_high[0], "*" | "?") {
        (b.min, b.max)
    } else {
        let start = int_or_name(low_and_high[0], b)?;
        match low_and_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_and_high[1], b)?),
            _ => return Err(format!("too many hyphens: {expr}")),
        }
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            // `N/step` runs from N to the field's end.
            if low_and_high.len() == 1 {
                end = b.max;
            }
            int(range_and_step[1])?
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < b.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            b.min
        ));
    }
    if end > b.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            b.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

/// robfig's `ParseStandard`: why `spec` is not a schedule, if it is not.
pub fn parse_error(spec: &str) -> Option<String> {
    if spec.is_empty() {
        return Some("empty spec string".into());
    }
    if let Some(descriptor) = spec.strip_prefix('@') {
        return match descriptor {
            "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => None,
            _ => match spec.strip_prefix("@every ") {
                Some(d) => GoDuration::parse(d)
                    .err()
                    .map(|e| format!("failed to parse duration {spec}: {e}")),
                None => Some(format!("unrecognized descriptor: {spec}")),
            },
        };
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Some(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    fields
        .iter()
        .zip(&FIELDS)
        .find_map(|(f, b)| f.split(',').find_map(|part| range(part, b).err()))
}

/// API-11: a CronJob's `spec.schedule` is a standard cron schedule as Kubernetes' parser
/// (robfig/cron v3) reads it: five fields (minute 0-59, hour 0-23, day of month 1-31, month 1-12
/// or `jan`…, day of week 0-6 or `sun`…; `*`, `?`, ranges, lists, steps) or a descriptor
/// (`@hourly`, `@daily`, `@every 1h30m`…), without a `TZ=` or `CRON_TZ=` prefix (the time zone
/// is `spec.timeZone`). Refused with 422 before any webhook.
///
/// Refused: `{apiVersion: batch/v1, kind: CronJob, metadata: {name: c}, spec: {schedule: "60 * * * *", jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}}}}}`
///
/// Admitted: `{apiVersion: batch/v1, kind: CronJob, metadata: {name: c}, spec: {schedule: "0 9 * * MON-FRI", jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}}}}}`
pub fn api_11_schedule(object: &Value) -> Option<Finding> {
    if (object["apiVersion"].as_str(), object["kind"].as_str())
        != (Some("batch/v1"), Some("CronJob"))
    {
        return None;
    }
    let schedule = object["spec"]["schedule"]
        .as_str()
        .filter(|s| !s.is_empty())?;
    let why = if schedule.contains("TZ") {
        Some(if object["spec"]["timeZone"].is_string() {
            "cannot use both timeZone field and TZ or CRON_TZ in schedule".to_owned()
        } else {
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead".to_owned()
        })
    } else {
        parse_error(schedule)
    }?;
    Some(finding(
        "API-11",
        "spec.schedule".into(),
        format!("Invalid value: {}: {why}", quoted(schedule)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_parse_as_robfigs_standard_parser_reads_them() {
        for ok in [
            "*/5 * * * *",
            "@hourly",
            "@every 1h30m",
            "0 9 * * MON-FRI",
            "0 0 31 2 *",
            "0 0 ? * 1",
            "0 0 1 jan,jul *",
            "5/15 1-3,7 * * *",
            "+5 * * * *",
        ] {
            assert_eq!(parse_error(ok), None, "{ok}");
        }
        for (bad, why) in [
            ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
            (
                "0 0 * * * *",
                "expected exactly 5 fields, found 6: [0 0 * * * *]",
            ),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            (
                "0 0 * * 5-1",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            ("0 0 0 * *", "beginning of range (0) below minimum (1): 0"),
            ("0 0 * * 7", "end of range (7) above maximum (6): 7"),
            ("@fortnightly", "unrecognized descriptor: @fortnightly"),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            (
                "x * * * *",
                "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
        ] {
            assert_eq!(parse_error(bad).as_deref(), Some(why), "{bad}");
        }
        assert!(parse_error("@every soon").is_some());
    }

    #[test]
    fn api_11_refuses_a_tz_prefix_and_names_the_schedule() {
        let cron = |s: &str| serde_json::json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"schedule": s}});
        let f = api_11_schedule(&cron("TZ=UTC 0 * * * *")).expect("refused");
        assert_eq!(f.field, "spec.schedule");
        assert!(f.message.contains("use timeZone field instead"), "{f:?}");
        assert!(api_11_schedule(&cron("0 * * * *")).is_none());
    }
}
