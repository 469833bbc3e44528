//! The delay schedules, worked by hand from their formulas.

use super::*;
use rand::{SeedableRng, rngs::Xoshiro256PlusPlus};

fn rng() -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(2014)
}

fn schedule(strategy: &Strategy, think: Duration, n: usize, seed: u64) -> Vec<Duration> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut b = Backoff::new(think);
    (0..n).map(|_| b.next_delay(strategy, &mut rng)).collect()
}

/// `draws` schedules of `n` retries each: `out[i]` holds every draw of
/// retry i + 1, in seconds.
fn draws(strategy: &Strategy, n: usize, draws: usize) -> Vec<Vec<f64>> {
    let mut rng = rng();
    let mut out = vec![Vec::with_capacity(draws); n];
    for _ in 0..draws {
        let mut b = Backoff::new(Duration::from_secs(1));
        for column in out.iter_mut() {
            column.push(b.next_delay(strategy, &mut rng).as_secs_f64());
        }
    }
    out
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn fixed_is_constant() {
    let d = ms(100);
    let s = schedule(&Strategy::Fixed { delay: d }, Duration::from_secs(7), 20, 1);
    assert!(s.iter().all(|&x| x == d));
}

#[test]
fn exponential_without_jitter_is_geometric_and_capped() {
    let s = Strategy::Exponential {
        min: Duration::from_secs(1),
        max: Duration::from_secs(10),
        factor: 2.0,
        jitter: 0.0,
    };
    let got: Vec<u64> = schedule(&s, Duration::ZERO, 6, 1)
        .iter()
        .map(|d| d.as_millis() as u64)
        .collect();
    assert_eq!(got, vec![1000, 2000, 4000, 8000, 10_000, 10_000]);
    assert!(s.is_deterministic());
}

#[test]
fn exponential_jitter_is_centred_on_the_schedule() {
    let s = Strategy::Exponential {
        min: ms(100),
        max: Duration::from_secs(300),
        factor: 2.7,
        jitter: 0.1,
    };
    let d = draws(&s, 3, 20_000);
    // Jitter compounds nothing: b_3 = 0.1 * 2.7^2 whatever the noise.
    assert!(d[0].iter().all(|x| (0.0..0.16).contains(x)));
    assert!(d[2].iter().all(|x| (0.0..0.729 * 1.6).contains(x)));
    // Standard error: 0.1 * 0.1 / sqrt(20k) = 7e-5 s for the first.
    assert!((mean(&d[0]) - 0.1).abs() < 5e-4, "{}", mean(&d[0]));
    assert!((mean(&d[2]) - 0.729).abs() < 4e-3, "{}", mean(&d[2]));
    assert!(!s.is_deterministic());
}

#[test]
fn exponential_jitter_never_goes_negative() {
    let s = Strategy::Exponential {
        min: ms(100),
        max: Duration::from_secs(1),
        factor: 2.0,
        jitter: 5.0,
    };
    let got = schedule(&s, Duration::ZERO, 5_000, 3);
    assert!(
        got.contains(&Duration::ZERO),
        "large jitter must clamp some to zero"
    );
}

#[test]
fn exponential_2014_multiplies_the_think_time_by_e() {
    let think = Duration::from_secs(10);
    let n = 20_000;
    let mut rng = rng();
    let (mut first, mut second) = (0.0, 0.0);
    for _ in 0..n {
        let mut b = Backoff::new(think);
        first += b
            .next_delay(&Strategy::exponential_2014(), &mut rng)
            .as_secs_f64();
        second += b
            .next_delay(&Strategy::exponential_2014(), &mut rng)
            .as_secs_f64();
    }
    let e = std::f64::consts::E;
    // Mean of e * 10 + N(0, 0.1): e * 10; the jitter of the first is
    // multiplied into the second: mean e^2 * 10.
    assert!((first / n as f64 - e * 10.0).abs() < 0.005);
    assert!((second / n as f64 - e * e * 10.0).abs() < 0.01);
}

#[test]
fn exponential_2014_caps_at_five_minutes_plus_jitter() {
    let s = schedule(
        &Strategy::exponential_2014(),
        Duration::from_secs(200),
        10,
        5,
    );
    for d in &s[1..] {
        assert!((d.as_secs_f64() - 300.0).abs() < 1.0, "{d:?}");
    }
}

#[test]
fn exponential_2014_jitter_is_clamped_at_zero() {
    // After a zero think time the first retry is pure jitter, N(0, 0.1 s):
    // half the draws are negative and must become zero, not negative.
    let mut rng = rng();
    let n = 10_000;
    let mut zeros = 0;
    for _ in 0..n {
        let d = Backoff::new(Duration::ZERO).next_delay(&Strategy::exponential_2014(), &mut rng);
        assert!(d < ms(600), "{d:?}");
        zeros += usize::from(d.is_zero());
    }
    let share = zeros as f64 / n as f64;
    assert!((share - 0.5).abs() < 0.03, "{share}");
}

#[test]
fn full_jitter_is_uniform_below_the_capped_exponential() {
    let s = Strategy::FullJitter {
        base: ms(100),
        cap: Duration::from_secs(1),
        factor: 2.0,
    };
    let d = draws(&s, 5, 20_000);
    // v_n = min(1 s, 0.1 * 2^n): 0.2, 0.4, 0.8, 1, 1.
    for (i, v) in [0.2, 0.4, 0.8, 1.0, 1.0].into_iter().enumerate() {
        assert!(d[i].iter().all(|x| (0.0..v).contains(x)), "retry {}", i + 1);
        // Uniform mean v/2, standard error v / sqrt(12 * 20k) = v * 0.002.
        assert!((mean(&d[i]) - v / 2.0).abs() < v * 0.01, "retry {}", i + 1);
    }
}

#[test]
fn equal_jitter_keeps_half_the_delay() {
    let s = Strategy::EqualJitter {
        base: ms(100),
        cap: Duration::from_secs(1),
        factor: 2.0,
    };
    let d = draws(&s, 5, 20_000);
    for (i, v) in [0.2, 0.4, 0.8, 1.0, 1.0].into_iter().enumerate() {
        assert!(
            d[i].iter().all(|x| (v / 2.0..v).contains(x)),
            "retry {}",
            i + 1
        );
        assert!(
            (mean(&d[i]) - 0.75 * v).abs() < v * 0.005,
            "retry {}",
            i + 1
        );
    }
}

#[test]
fn decorrelated_jitter_spreads_from_the_previous_sleep() {
    let s = Strategy::DecorrelatedJitter {
        base: ms(100),
        cap: Duration::from_secs(2),
        factor: 3.0,
    };
    let mut rng = rng();
    let mut firsts = Vec::new();
    for _ in 0..20_000 {
        let mut b = Backoff::new(Duration::from_secs(9));
        let mut prev: f64 = 0.1;
        for n in 0..12 {
            let d = b.next_delay(&s, &mut rng).as_secs_f64();
            assert!(
                d >= 0.1 - 1e-9 && d <= (3.0 * prev).min(2.0) + 1e-9,
                "{d} after {prev}"
            );
            if n == 0 {
                firsts.push(d);
            }
            prev = d;
        }
    }
    // First retry: U(0.1, 0.3), mean 0.2.
    assert!((mean(&firsts) - 0.2).abs() < 0.002, "{}", mean(&firsts));
}

#[test]
fn truncated_binary_draws_from_a_growing_then_reset_window() {
    let s = Strategy::TruncatedBinary {
        slot: ms(10),
        ceiling: 3,
        stay_at_ceiling: false,
    };
    let d = draws(&s, 6, 40_000);
    // Collisions 1, 2, 3, then reset: 1, 2, 3. With c collisions the wait
    // is 10 ms * (2^k - 1), k uniform in 0..=c: mean 10 * ((2^(c+1) - 1)
    // / (c + 1) - 1) ms.
    let expected = |c: i32| 0.01 * ((2f64.powi(c + 1) - 1.0) / f64::from(c + 1) - 1.0);
    for (i, c) in [1, 2, 3, 1, 2, 3].into_iter().enumerate() {
        let allowed: Vec<f64> = (0..=c).map(|k| 0.01 * (2f64.powi(k) - 1.0)).collect();
        assert!(
            d[i].iter()
                .all(|x| allowed.iter().any(|a| (a - x).abs() < 1e-9)),
            "retry {}",
            i + 1
        );
        assert!(
            (mean(&d[i]) - expected(c)).abs() < expected(c) * 0.03,
            "retry {}",
            i + 1
        );
    }
    let largest = d[2].iter().cloned().fold(0.0, f64::max);
    assert!((largest - 0.07).abs() < 1e-9);
}

#[test]
fn truncated_binary_can_stay_at_the_ceiling() {
    let s = Strategy::TruncatedBinary {
        slot: ms(10),
        ceiling: 2,
        stay_at_ceiling: true,
    };
    let d = draws(&s, 8, 5_000);
    for column in &d[1..] {
        let largest = column.iter().cloned().fold(0.0, f64::max);
        assert!((largest - 0.03).abs() < 1e-9, "{largest}");
    }
}

#[test]
fn google_doubles_from_one_second_plus_up_to_a_second_capped() {
    let s = Strategy::Google {
        first: Duration::from_secs(1),
        factor: 2.0,
        max: Duration::from_secs(32),
        random: ms(1000),
    };
    let d = draws(&s, 8, 20_000);
    for (i, base) in [1.0, 2.0, 4.0, 8.0, 16.0].into_iter().enumerate() {
        assert!(
            d[i].iter().all(|x| (base..base + 1.0).contains(x)),
            "retry {}",
            i + 1
        );
        assert!((mean(&d[i]) - (base + 0.5)).abs() < 0.01, "retry {}", i + 1);
    }
    // 32 + U(0, 1) is capped at 32.
    for column in &d[5..] {
        assert!(column.iter().all(|&x| x == 32.0));
    }
}

#[test]
fn scaling_divides_every_duration_and_keeps_factors() {
    let s = Strategy::Google {
        first: Duration::from_secs(1),
        factor: 2.0,
        max: Duration::from_secs(32),
        random: ms(1000),
    };
    assert_eq!(
        s.scaled(10.0),
        Strategy::Google {
            first: ms(100),
            factor: 2.0,
            max: Duration::from_millis(3200),
            random: ms(100),
        }
    );
    assert_eq!(
        Strategy::exponential_2014().scaled(10.0),
        Strategy::Exponential2014 {
            cap: Duration::from_secs(30),
            jitter: ms(10),
        }
    );
    // A scaled schedule is the original one, ten times faster.
    let e = Strategy::Exponential {
        min: ms(100),
        max: Duration::from_secs(300),
        factor: 2.7,
        jitter: 0.1,
    };
    let full = schedule(&e, Duration::ZERO, 8, 4);
    let fast = schedule(&e.scaled(10.0), Duration::ZERO, 8, 4);
    for (a, b) in full.iter().zip(&fast) {
        assert!((a.as_secs_f64() / 10.0 - b.as_secs_f64()).abs() < 1e-6);
    }
}

#[test]
fn same_seed_same_schedule() {
    let s = Strategy::Exponential {
        min: ms(100),
        max: Duration::from_secs(300),
        factor: 2.7,
        jitter: 0.1,
    };
    assert_eq!(
        schedule(&s, Duration::ZERO, 10, 77),
        schedule(&s, Duration::ZERO, 10, 77)
    );
}
