//! Time compression for quick experiments: every duration divided by a
//! factor K (and every rate multiplied by it), so that the same experiment
//! runs K times faster with the same shape.

use std::time::Duration;

/// Divides a duration by `k`, saturating instead of panicking.
pub fn compress(d: Duration, k: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() / k).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divides_and_saturates() {
        assert_eq!(
            compress(Duration::from_secs(2), 10.0),
            Duration::from_millis(200)
        );
        assert_eq!(
            compress(Duration::from_secs(2), 1.0),
            Duration::from_secs(2)
        );
        assert_eq!(compress(Duration::MAX, 1e-300), Duration::MAX);
    }
}
