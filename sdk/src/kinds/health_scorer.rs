//! Health scorers turn window statistics into a verdict.

use crate::{Config, Verdict, WindowStats};

/// A health policy. Implement this and call [`crate::export_health_scorer!`].
pub trait HealthScorer: Sized + 'static {
    /// Validates the manifest config and builds the plugin.
    fn new(config: &Config) -> Result<Self, String>;
    /// Scores one endpoint's window.
    fn score(&mut self, stats: &WindowStats) -> Verdict;
}
