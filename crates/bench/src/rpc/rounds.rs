//! Several rounds of one cell, read as one row, and ratios read round by round.
//!
//! Why rounds: on a shared machine the speed of everything drifts by tens of percent
//! within a minute (another tenant's load, the host's scheduling), and a run that measures
//! one system after another charges that drift to whichever system ran at the bad time.
//! Interleaved rounds give every system a share of each moment; a ratio taken between two
//! systems in the same round (seconds apart) cancels the drift, and the median over the
//! rounds drops the round a hiccup spoiled.

use axle::core::latency::LatencySnapshot;

use super::Row;

/// One system's rounds of one cell as one row: counts and seconds summed, CPU and
/// allocations per request weighted by each round's requests, percentiles read from the
/// histogram every round added to (`merged`).
pub(crate) fn combine(rounds: &[Row], merged: &LatencySnapshot) -> Row {
    let first = rounds.first().expect("a cell runs at least one round");
    let requests: u64 = rounds.iter().map(|r| r.requests).sum();
    let seconds: f64 = rounds.iter().map(|r| r.seconds).sum();
    let per_request = |of: fn(&Row) -> Option<f64>| -> Option<f64> {
        let mut total = 0.0;
        for r in rounds {
            total += of(r)? * r.requests as f64;
        }
        Some(total / requests.max(1) as f64)
    };
    Row {
        system: first.system.clone(),
        concurrency: first.concurrency,
        requests,
        errors: rounds.iter().map(|r| r.errors).sum(),
        req_per_s: requests as f64 / seconds.max(1e-9),
        seconds,
        p50_us: merged.p50_ns as f64 / 1000.0,
        p99_us: merged.p99_ns as f64 / 1000.0,
        payload_bytes: first.payload_bytes,
        cpu_us_per_req: per_request(|r| r.cpu_us_per_req),
        allocs_per_req: per_request(|r| r.allocs_per_req),
    }
}

/// `a ÷ b` in each round (pairs of rounds run seconds apart), as the median and the
/// range; `None` when a round has no figure for either side.
pub(crate) fn per_round(a: &[Row], b: &[Row], of: fn(&Row) -> Option<f64>) -> Option<Spread> {
    let ratios: Option<Vec<f64>> = a
        .iter()
        .zip(b)
        .map(|(a, b)| Some(of(a)? / of(b)?.max(1e-9)))
        .collect();
    Spread::of(ratios?)
}

/// The median of some figures, and their least and greatest.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Spread {
    pub median: f64,
    pub range: [f64; 2],
}

impl Spread {
    fn of(mut values: Vec<f64>) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            range: [values[0], values[n - 1]],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(requests: u64, seconds: f64, cpu: Option<f64>) -> Row {
        Row {
            system: "axle".into(),
            concurrency: 64,
            requests,
            errors: 1,
            req_per_s: requests as f64 / seconds,
            seconds,
            p50_us: 0.0,
            p99_us: 0.0,
            payload_bytes: 1024,
            cpu_us_per_req: cpu,
            allocs_per_req: None,
        }
    }

    fn snapshot(p50_ns: u64, p99_ns: u64) -> LatencySnapshot {
        LatencySnapshot {
            p50_ns,
            p99_ns,
            ..LatencySnapshot::default()
        }
    }

    #[test]
    fn rounds_add_up_and_cpu_is_weighted_by_requests() {
        let rows = [row(300, 1.0, Some(10.0)), row(100, 1.0, Some(20.0))];
        let one = combine(&rows, &snapshot(200_000, 900_000));
        assert_eq!(one.requests, 400);
        assert_eq!(one.errors, 2);
        assert_eq!(one.seconds, 2.0);
        assert_eq!(one.req_per_s, 200.0);
        // (300 × 10 + 100 × 20) / 400, not the mean of the two rounds (15).
        assert_eq!(one.cpu_us_per_req, Some(12.5));
        assert_eq!(one.allocs_per_req, None);
        assert_eq!((one.p50_us, one.p99_us), (200.0, 900.0));
    }

    #[test]
    fn a_round_without_a_cpu_reading_leaves_the_row_without_one() {
        let rows = [row(300, 1.0, Some(10.0)), row(100, 1.0, None)];
        assert_eq!(combine(&rows, &snapshot(1, 1)).cpu_us_per_req, None);
    }

    #[test]
    fn a_ratio_is_the_median_of_the_rounds_and_a_bad_round_is_only_its_range() {
        // The machine slowed down in the second round for both systems alike, and a
        // hiccup spoiled the third for `a` alone.
        let a = [
            row(800, 1.0, None),
            row(400, 1.0, None),
            row(100, 1.0, None),
        ];
        let b = [
            row(1000, 1.0, None),
            row(500, 1.0, None),
            row(1000, 1.0, None),
        ];
        let s = per_round(&a, &b, |r| Some(r.req_per_s)).unwrap();
        assert_eq!(s.median, 0.8);
        assert_eq!(s.range, [0.1, 0.8]);
        let even = per_round(&a[..2], &b[..2], |r| Some(r.req_per_s)).unwrap();
        assert_eq!(even.median, 0.8);
        assert_eq!(per_round(&a, &b, |r| r.cpu_us_per_req), None);
        assert_eq!(per_round(&[], &[], |r| Some(r.req_per_s)), None);
    }
}
