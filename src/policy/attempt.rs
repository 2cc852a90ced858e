//! Repeated attempts at one task instance: each attempt re-seeds the policy with
//! `seed + ATTEMPT_SEED_STRIDE × (attempt − 1)` while the page keeps the episode
//! seed, so the instance is the same and the policy's sampling is fresh. Collection
//! retries and the evaluation's pass@k attempts both go through [`AttemptSeeded`].

use super::{Policy, PolicyInput, PolicyOutput};
use crate::trajectory::Task;
use anyhow::Result;

/// Stride between the policy seeds of successive attempts (a prime, so attempt
/// streams of neighbouring seeds do not collide).
pub const ATTEMPT_SEED_STRIDE: u64 = 1_000_003;

/// The policy seed of `attempt` (1-based) at the episode seed `seed`; attempt 1 keeps
/// the episode seed.
pub fn attempt_seed(seed: u64, attempt: u32) -> u64 {
    seed.wrapping_add(ATTEMPT_SEED_STRIDE.wrapping_mul(u64::from(attempt.saturating_sub(1))))
}

/// Wraps a policy so that [`Policy::reset`] gets the attempt's policy seed.
pub struct AttemptSeeded<'a> {
    pub inner: &'a mut dyn Policy,
    pub attempt: u32,
}

impl Policy for AttemptSeeded<'_> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn reset(&mut self, task: &Task, seed: u64) {
        self.inner.reset(task, attempt_seed(seed, self.attempt));
    }
    fn notes(&self) -> Vec<String> {
        self.inner.notes()
    }
    fn act(&mut self, input: &PolicyInput<'_>) -> Result<PolicyOutput> {
        self.inner.act(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_attempt_keeps_the_seed_and_later_ones_step_by_the_stride() {
        assert_eq!(attempt_seed(7, 1), 7);
        assert_eq!(attempt_seed(7, 0), 7);
        assert_eq!(attempt_seed(7, 3), 7 + 2 * ATTEMPT_SEED_STRIDE);
        assert_eq!(attempt_seed(u64::MAX, 2), ATTEMPT_SEED_STRIDE - 1);
    }
}
