//! The model's policies beside the libraries they follow, run for real:
//! the same sequence of events fed to the library and to the model, every
//! decision compared. Here the Rust ones, as dev-dependencies pinned to a
//! release (`Cargo.toml`); the Python and JavaScript ones run from
//! scripts.
//!
//! tower 0.5.3's `TpsBudget` reads tokio's clock, so it runs under a
//! paused clock that the test advances; the model is given the same
//! instants.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use retry_storm::policy::shipped::TpsBudget as Model;
use tower::retry::budget::{Budget, TpsBudget};

/// One budget's settings, as tower takes them.
#[derive(Debug, Clone, Copy)]
struct Settings {
    ttl_s: u64,
    min_per_sec: u32,
    percent: f32,
}

/// Feeds `steps` seeded events (deposits, withdrawals, time passing) to
/// tower's budget and to the model's; returns how many withdrawals were
/// compared and how many were allowed, after checking that every one got
/// the same answer.
async fn compare(settings: Settings, seed: u64, steps: usize) -> (usize, usize) {
    let Settings {
        ttl_s,
        min_per_sec,
        percent,
    } = settings;
    let ttl = Duration::from_secs(ttl_s);
    let theirs = TpsBudget::new(ttl, min_per_sec, percent);
    let mut ours = Model::new(ttl, f64::from(min_per_sec), f64::from(percent));
    let start = tokio::time::Instant::now();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (mut compared, mut allowed) = (0, 0);
    for step in 0..steps {
        let now = start.elapsed();
        match rng.random_range(0..10) {
            // Bursts of requests, of retries, and quiet spells of every
            // length up to past the ttl.
            0..=3 => {
                // Enough, now and then, to pay for a retry at a small
                // percent (999 deposits a retry at 0.1 %).
                let most = if percent > 0.0 && percent < 0.01 {
                    (2.0 / percent) as u32
                } else {
                    6
                };
                for _ in 0..rng.random_range(1..most) {
                    theirs.deposit();
                    ours.deposit(now);
                }
            }
            4..=7 => {
                for _ in 0..rng.random_range(1..8) {
                    let (a, b) = (theirs.withdraw(), ours.withdraw(now));
                    assert_eq!(
                        a, b,
                        "{settings:?} seed {seed} step {step} at {now:?}: tower {a}, model {b}"
                    );
                    compared += 1;
                    allowed += usize::from(a);
                }
            }
            8 => {
                let ms = rng.random_range(1..ttl_s * 1000 / 5);
                tokio::time::advance(Duration::from_millis(ms)).await;
            }
            _ => {
                let ms = rng.random_range(1..ttl_s * 1500);
                tokio::time::advance(Duration::from_millis(ms)).await;
            }
        }
    }
    (compared, allowed)
}

#[tokio::test(start_paused = true)]
async fn towers_tps_budget_and_the_model_answer_every_withdrawal_alike() {
    // tower's default, its own tests' settings, percents whose f32 and
    // f64 withdrawals differ (0.1 %, 0.2 %), one in three, more than one
    // retry a request, and no percent at all (the reserve alone).
    let settings = [
        (10, 10, 0.2),
        (1, 0, 0.5),
        (1, 5, 1.0),
        (10, 0, 0.001),
        (5, 1, 0.002),
        (3, 2, 0.3),
        (60, 0, 2.0),
        (2, 3, 0.0),
        (7, 1, 0.6),
    ];
    for (i, &(ttl_s, min_per_sec, percent)) in settings.iter().enumerate() {
        let s = Settings {
            ttl_s,
            min_per_sec,
            percent,
        };
        let (compared, allowed) = compare(s, 2014 + i as u64, 3_000).await;
        // Both answers came up often: the sequences reach the budget's
        // edge, where a wrong withdrawal or rotation would show.
        assert!(
            allowed > 20 && compared - allowed > 20,
            "{s:?}: {allowed} of {compared} allowed"
        );
    }
}
