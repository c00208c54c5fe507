//! Retry delays for the loops that talk to the API server outside a watch (a watch has
//! kube-runtime's own back-off): exponential with jitter, from backon, the crate kube-runtime's
//! watchers use, so that replicas restarted together do not retry in step.

use std::time::Duration;

use backon::{BackoffBuilder as _, ExponentialBackoff, ExponentialBuilder};

/// Delays that double from `min` up to `max`, each with random jitter added, without end;
/// [`Backoff::reset`] after a success starts again from `min`.
#[derive(Debug)]
pub struct Backoff {
    builder: ExponentialBuilder,
    delays: ExponentialBackoff,
    max: Duration,
}

impl Backoff {
    /// Doubling from `min` to at most `max` (plus jitter).
    pub fn new(min: Duration, max: Duration) -> Self {
        let builder = ExponentialBuilder::new()
            .with_min_delay(min)
            .with_max_delay(max)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        Self {
            delays: builder.build(),
            builder,
            max,
        }
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        // Without a limit on times the iterator never ends; the cap stands in if it did.
        self.delays.next().unwrap_or(self.max)
    }

    /// Starts again from the shortest delay.
    pub fn reset(&mut self) {
        self.delays = self.builder.build();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_with_jitter_up_to_the_cap_and_reset() {
        let (min, max) = (Duration::from_millis(200), Duration::from_secs(10));
        let mut b = Backoff::new(min, max);
        let first: Vec<Duration> = (0..12).map(|_| b.next_delay()).collect();
        // Jitter adds up to one more delay: each lies in [base, 2 × base].
        let mut base = min;
        for d in &first {
            assert!(*d >= base && *d <= base * 2, "{d:?} outside [{base:?}, 2×]");
            base = (base * 2).min(max);
        }
        b.reset();
        let again = b.next_delay();
        assert!(again >= min && again <= min * 2, "{again:?}");
    }
}
