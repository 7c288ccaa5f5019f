//! The Prometheus text exposition format (version 0.0.4), written by hand: `# HELP` and
//! `# TYPE` once per family, then its samples `name{label="value",...} value`, histograms
//! as `_bucket{le=...}` (cumulative, ending with `+Inf`), `_sum` and `_count`. Samples
//! may be added to any family in any order; each family comes out whole, as the format
//! requires.

use std::fmt::Write;

use axle_core::latency::{Exported, EXPORT_BOUNDS_NS};

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

struct Family {
    name: &'static str,
    samples: String,
    header: String,
}

/// A scrape being written.
#[derive(Default)]
pub struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    /// Declares family `name` (its samples come out in the order they are added).
    pub fn family(&mut self, name: &'static str, kind: Kind, help: &str) {
        let header = format!(
            "# HELP {name} {}\n# TYPE {name} {}\n",
            escape_help(help),
            kind.as_str()
        );
        self.families.push(Family {
            name,
            samples: String::new(),
            header,
        });
    }

    /// One sample of family `name` (declared first: an undeclared name is a bug here,
    /// so it panics in tests and is dropped otherwise).
    pub fn sample(&mut self, name: &'static str, labels: &[(&str, &str)], value: f64) {
        self.line(name, name, labels, value);
    }

    /// One histogram of family `name`, in seconds, from a [`Exported`] in nanoseconds.
    pub fn histogram(&mut self, name: &'static str, labels: &[(&str, &str)], h: &Exported) {
        let bucket = format!("{name}_bucket");
        let bounds: Vec<String> = EXPORT_BOUNDS_NS
            .iter()
            .map(|b| seconds(*b).to_string())
            .collect();
        let mut with_le: Vec<(&str, &str)> = labels.to_vec();
        with_le.push(("le", ""));
        let last = with_le.len() - 1;
        for (i, le) in bounds.iter().enumerate() {
            with_le[last].1 = le;
            let n = h.le.get(i).copied().unwrap_or(0);
            self.line(name, &bucket, &with_le, n as f64);
        }
        with_le[last].1 = "+Inf";
        self.line(name, &bucket, &with_le, h.count as f64);
        self.line(name, &format!("{name}_sum"), labels, seconds(h.sum_ns));
        self.line(name, &format!("{name}_count"), labels, h.count as f64);
    }

    fn line(&mut self, family: &str, name: &str, labels: &[(&str, &str)], value: f64) {
        let Some(f) = self.families.iter_mut().find(|f| f.name == family) else {
            debug_assert!(false, "metric family `{family}` was not declared");
            return;
        };
        let out = &mut f.samples;
        out.push_str(name);
        if !labels.is_empty() {
            out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{k}=\"{}\"", escape_label(v));
            }
            out.push('}');
        }
        let _ = writeln!(out, " {}", number(value));
    }

    /// The text of the scrape: families with at least one sample, in declaration order.
    pub fn finish(self) -> String {
        let mut out = String::new();
        for f in self.families.into_iter().filter(|f| !f.samples.is_empty()) {
            out.push_str(&f.header);
            out.push_str(&f.samples);
        }
        out
    }
}

/// Nanoseconds as seconds.
pub fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A sample value: integers without a fraction, the special values as Prometheus spells
/// them.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        v.to_string()
    }
}

/// A label value: backslash, double quote and newline escaped.
pub fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Help text: backslash and newline escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label("two\nlines"), "two\\nlines");
        assert_eq!(escape_label("plain/ok *"), "plain/ok *");
        assert_eq!(escape_help("a\\b\nc"), "a\\\\b\\nc");
    }

    #[test]
    fn families_come_out_whole_with_help_and_type() {
        let mut e = Exposition::default();
        e.family("axle_a_total", Kind::Counter, "A's.\nTwo lines.");
        e.family("axle_b", Kind::Gauge, "B.");
        e.family("axle_unused", Kind::Gauge, "Never sampled: left out.");
        e.sample("axle_a_total", &[("service", "x\"y")], 3.0);
        e.sample("axle_b", &[], 0.5);
        e.sample("axle_a_total", &[("service", "z")], 1.0);
        assert_eq!(
            e.finish(),
            "# HELP axle_a_total A's.\\nTwo lines.\n# TYPE axle_a_total counter\n\
             axle_a_total{service=\"x\\\"y\"} 3\naxle_a_total{service=\"z\"} 1\n\
             # HELP axle_b B.\n# TYPE axle_b gauge\naxle_b 0.5\n"
        );
    }

    #[test]
    fn a_histogram_has_cumulative_buckets_sum_and_count_in_seconds() {
        let l = axle_core::latency::Latency::default();
        for ns in [50_000, 3_000_000, 20_000_000_000] {
            l.record(ns);
        }
        let mut e = Exposition::default();
        e.family("axle_h_seconds", Kind::Histogram, "H.");
        e.histogram("axle_h_seconds", &[("m", "get")], &l.exported());
        let text = e.finish();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&"axle_h_seconds_bucket{m=\"get\",le=\"0.0001\"} 1"));
        assert!(lines.contains(&"axle_h_seconds_bucket{m=\"get\",le=\"0.005\"} 2"));
        assert!(lines.contains(&"axle_h_seconds_bucket{m=\"get\",le=\"10\"} 2"));
        assert!(lines.contains(&"axle_h_seconds_bucket{m=\"get\",le=\"+Inf\"} 3"));
        assert!(lines.contains(&"axle_h_seconds_sum{m=\"get\"} 20.00305"));
        assert!(lines.contains(&"axle_h_seconds_count{m=\"get\"} 3"));
        let buckets = lines.iter().filter(|l| l.contains("_bucket")).count();
        assert_eq!(buckets, EXPORT_BOUNDS_NS.len() + 1);
    }

    #[test]
    fn special_values_are_spelled_the_prometheus_way() {
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(42.0), "42");
        assert_eq!(number(0.25), "0.25");
    }
}
