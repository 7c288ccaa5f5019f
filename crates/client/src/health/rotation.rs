//! Which of a service's endpoints selection may use: the health filter of the client's
//! request path (`docs/architecture.md`), as a pure function of each endpoint's standing.
//!
//! Healthy endpoints first; subhealthy ones only when no healthy one is left; never an
//! unreachable one (a call to it cannot succeed, so no rule keeps it). The ejection cap
//! then re-admits the best of the rest until no more than `max_ejection_percent` of the
//! service's endpoints are out and at least `min_hosts` are in: scoring may be wrong (the
//! false positives users of outlier detection complain about), and ejecting most of a
//! service moves all of its load onto the few endpoints left.

use super::HealthState;

/// One endpoint's standing, as the health filter sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Standing {
    pub id: u32,
    /// The last verdict's state.
    pub state: HealthState,
    /// Removed after repeated unhealthy verdicts (waiting for its re-admission probe).
    pub removed: bool,
    /// Cannot be reached: connect refused, or heartbeats lost.
    pub unreachable: bool,
}

/// The ejection cap of one service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cap {
    /// At most this share of the service's endpoints may be out (0–100).
    pub max_ejection_percent: u32,
    /// At least this many endpoints stay in (when that many are reachable).
    pub min_hosts: u32,
}

/// How good an endpoint that is not admitted is, to re-admit the best first (lower is
/// better): subhealthy, then removed subhealthy, then dead.
fn rank(s: &Standing) -> u8 {
    match (s.state, s.removed) {
        (HealthState::Healthy, false) => 0,
        (HealthState::Subhealthy, false) => 1,
        (HealthState::Healthy, true) => 2,
        (HealthState::Subhealthy, true) => 3,
        (HealthState::Dead, _) => 4,
    }
}

/// Whether a weight changed enough to publish a new table (by more than a tenth, or to or
/// from zero): small drifts of a health factor do not churn every plugin's sets.
pub fn weight_moved(old: u32, new: u32) -> bool {
    if old == new {
        return false;
    }
    if old == 0 || new == 0 {
        return true;
    }
    u64::from(old.abs_diff(new)) * 10 > u64::from(old.max(new))
}

/// The ids selection may use, in the order given.
pub fn admit(endpoints: &[Standing], cap: Cap) -> Vec<u32> {
    let reachable: Vec<&Standing> = endpoints.iter().filter(|s| !s.unreachable).collect();
    let in_state = |state: HealthState| {
        reachable
            .iter()
            .filter(move |s| s.state == state && !s.removed)
            .map(|s| s.id)
    };
    let mut admitted: Vec<u32> = in_state(HealthState::Healthy).collect();
    if admitted.is_empty() {
        admitted = in_state(HealthState::Subhealthy).collect();
    }
    let total = endpoints.len() as u64;
    let max_out = total * u64::from(cap.max_ejection_percent.min(100)) / 100;
    let need = (total - max_out)
        .max(u64::from(cap.min_hosts))
        .min(reachable.len() as u64) as usize;
    if admitted.len() < need {
        let mut rest: Vec<&&Standing> = reachable
            .iter()
            .filter(|s| !admitted.contains(&s.id))
            .collect();
        rest.sort_by_key(|s| rank(s));
        admitted.extend(rest.iter().take(need - admitted.len()).map(|s| s.id));
        // Keep the caller's order, so the same standing always gives the same set.
        admitted.sort_by_key(|id| endpoints.iter().position(|s| s.id == *id));
    }
    admitted
}

#[cfg(test)]
mod tests {
    use super::*;
    use HealthState::*;

    fn s(id: u32, state: HealthState) -> Standing {
        Standing {
            id,
            state,
            removed: false,
            unreachable: false,
        }
    }

    const HALF: Cap = Cap {
        max_ejection_percent: 50,
        min_hosts: 1,
    };
    const ALL: Cap = Cap {
        max_ejection_percent: 100,
        min_hosts: 0,
    };

    #[test]
    fn healthy_first_then_subhealthy_never_unreachable() {
        let eps = [s(1, Healthy), s(2, Subhealthy), s(3, Healthy)];
        assert_eq!(admit(&eps, ALL), vec![1, 3]);
        let eps = [s(1, Subhealthy), s(2, Dead), s(3, Subhealthy)];
        assert_eq!(admit(&eps, ALL), vec![1, 3]);
        let mut gone = s(1, Healthy);
        gone.unreachable = true;
        assert_eq!(admit(&[gone, s(2, Subhealthy)], ALL), vec![2]);
        assert_eq!(
            admit(
                &[gone],
                Cap {
                    max_ejection_percent: 0,
                    min_hosts: 5
                }
            ),
            Vec::<u32>::new(),
            "no cap keeps an unreachable endpoint"
        );
    }

    #[test]
    fn the_cap_readmits_the_best_of_the_rest() {
        // 2 of 3 failing: at most floor(3 × 50%) = 1 may be out.
        let eps = [s(1, Healthy), s(2, Dead), s(3, Subhealthy)];
        assert_eq!(admit(&eps, HALF), vec![1, 3]);
        let mut removed = s(3, Subhealthy);
        removed.removed = true;
        let eps = [s(1, Healthy), s(2, Subhealthy), removed];
        assert_eq!(admit(&eps, HALF), vec![1, 2]);
        // One of three out is within the cap.
        let eps = [s(1, Healthy), s(2, Healthy), s(3, Subhealthy)];
        assert_eq!(admit(&eps, HALF), vec![1, 2]);
    }

    #[test]
    fn only_a_tenth_or_a_zero_moves_a_weight() {
        assert!(!weight_moved(100, 100));
        assert!(!weight_moved(100, 91));
        assert!(weight_moved(100, 89));
        assert!(weight_moved(0, 1));
        assert!(weight_moved(5, 0));
    }

    #[test]
    fn min_hosts_holds_a_floor() {
        let eps = [s(1, Healthy), s(2, Dead), s(3, Dead), s(4, Dead)];
        let cap = Cap {
            max_ejection_percent: 100,
            min_hosts: 2,
        };
        assert_eq!(admit(&eps, cap).len(), 2);
        assert!(admit(&eps, cap).contains(&1));
    }
}
