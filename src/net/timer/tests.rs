//! The grid, the alarm and the timer, against the clock.

use super::*;

use std::future::poll_fn;
use std::pin::pin;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn deadlines_round_up_to_the_next_step_of_the_grid() {
    let origin = Instant::now();
    let us = Duration::from_micros;
    let grid = Grid {
        origin,
        resolution: us(500),
    };
    assert_eq!(grid.round_up(origin), origin);
    assert_eq!(grid.round_up(origin + us(1)), origin + us(500));
    assert_eq!(grid.round_up(origin + us(500)), origin + us(500));
    assert_eq!(grid.round_up(origin + us(501)), origin + us(1_000));
    assert_eq!(grid.round_up(origin + us(7_250)), origin + us(7_500));
    assert_eq!(
        grid.round_up(origin - us(300)),
        origin,
        "the past rings at once"
    );
    let exact = Grid {
        origin,
        resolution: Duration::ZERO,
    };
    assert_eq!(exact.round_up(origin + us(7_250)), origin + us(7_250));
    let far = origin + Duration::from_secs(100 * 365 * 86_400);
    let rounded = grid.round_up(far);
    assert!(rounded >= far && rounded - far < us(500));
}

#[test]
fn a_grid_on_the_clock_steps_through_the_clock_s_zero() {
    let now = Instant::now();
    let ns = Duration::from_nanos;
    // 1,234.567890123 s since the clock's zero.
    let since_zero = ns(1_234_567_890_123);
    // 1_234_567_890_123 = 2_469_135 * 500_000 + 390_123: the last step
    // was 390,123 ns ago, the next is in 109,877 ns.
    let grid = Grid::from_reading(now, since_zero, Duration::from_micros(500));
    assert_eq!(grid.origin, now - ns(390_123));
    assert_eq!(grid.round_up(now), now + ns(109_877));
    // 1_234_567_890_123 = 4_115_226 * 300_000 + 90_123.
    let grid = Grid::from_reading(now, since_zero, Duration::from_micros(300));
    assert_eq!(grid.round_up(now), now + ns(209_877));
    let exact = Grid::from_reading(now, since_zero, Duration::ZERO);
    assert_eq!(exact.round_up(now + ns(7)), now + ns(7));
}

#[test]
fn grids_on_the_clock_ring_together_and_on_the_clock_s_own_steps() {
    let step = Duration::from_micros(500);
    let (a, b) = (Grid::on_clock(step), Grid::on_clock(step));
    assert_eq!(a.origin, b.origin, "one process, one reading");
    // Every step of a 1 ms grid is a step of the 500 us one.
    let coarse = Grid::on_clock(2 * step);
    let apart = coarse.origin.max(a.origin) - coarse.origin.min(a.origin);
    assert!(apart == Duration::ZERO || apart == step, "{apart:?} apart");
    // A step, read on the clock itself, is a whole number of steps
    // since its zero (within the two readings' width).
    let (now, since_zero) = read_clock();
    let ring = a.round_up(now);
    let phase = (since_zero + (ring - now)).as_nanos() % step.as_nanos();
    let off = phase.min(step.as_nanos() - phase);
    assert!(off < 20_000, "{off} ns off the clock's steps");
}

#[tokio::test]
async fn on_a_coarse_grid_the_alarm_rings_at_the_step_after_the_earliest_deadline() {
    let timer = Timer::start(ms(5)).unwrap();
    let grid = timer.shared.alarm.grid;
    let base = Instant::now() + ms(40);
    let us = Duration::from_micros;
    let mut sleeps = [7_300, 2_100, 9_999].map(|n| Box::pin(timer.sleep_until(base + us(n))));
    for sleep in &mut sleeps {
        let polled = poll_fn(|cx| Poll::Ready(sleep.as_mut().poll(cx))).await;
        assert!(polled.is_pending());
    }
    let armed = timer.shared.state.lock().unwrap().armed.unwrap();
    assert_eq!(armed, grid.round_up(base + us(2_100)));
    assert_eq!((armed - grid.origin).as_nanos() % ms(5).as_nanos(), 0);
    for (sleep, n) in sleeps.into_iter().zip([7_300, 2_100, 9_999]) {
        sleep.await;
        assert!(Instant::now() >= base + us(n), "ended before its deadline");
    }
}

#[tokio::test]
async fn an_alarm_rings_at_its_instant_and_the_last_setting_counts() {
    let alarm = Alarm::new(Duration::ZERO).unwrap();
    let start = Instant::now();
    alarm.set(start + ms(5));
    alarm.rung().await.unwrap();
    assert!(start.elapsed() >= ms(5));
    let start = Instant::now();
    alarm.set(start + ms(2));
    alarm.set(start + ms(30));
    alarm.rung().await.unwrap();
    assert!(start.elapsed() >= ms(30), "rang at the replaced instant");
}

#[tokio::test]
async fn an_alarm_set_in_the_past_rings_at_once_and_a_cleared_one_is_off() {
    let alarm = Alarm::new(Duration::ZERO).unwrap();
    alarm.set(Instant::now() - ms(1_000));
    alarm.rung().await.unwrap();
    alarm.set(Instant::now() + ms(3_600_000));
    assert!(alarm.fd.get_ref().0.get().unwrap().is_some());
    alarm.clear();
    assert!(alarm.fd.get_ref().0.get().unwrap().is_none());
}

#[tokio::test]
async fn no_sleep_ends_before_its_deadline() {
    let timer = Timer::start(Duration::ZERO).unwrap();
    let start = Instant::now();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..200 {
        let deadline = start + Duration::from_micros(rng.random_range(0..30_000));
        let timer = timer.clone();
        tasks.spawn(async move {
            timer.sleep_until(deadline).await;
            (deadline, Instant::now())
        });
    }
    let mut ended = 0;
    while let Some(task) = tasks.join_next().await {
        let (deadline, woke) = task.unwrap();
        assert!(woke >= deadline, "woke {:?} early", deadline - woke);
        ended += 1;
    }
    assert_eq!(ended, 200);
    assert!(
        timer
            .shared
            .state
            .lock()
            .unwrap()
            .sleepers
            .next_at()
            .is_none()
    );
}

#[tokio::test]
async fn an_earlier_deadline_set_later_is_not_held_up_by_a_later_one() {
    let timer = Timer::start(Duration::ZERO).unwrap();
    let start = Instant::now();
    let mut far = pin!(timer.sleep_until(start + ms(5_000)));
    let polled = poll_fn(|cx| Poll::Ready(far.as_mut().poll(cx))).await;
    assert!(polled.is_pending());
    assert_eq!(
        timer.shared.state.lock().unwrap().armed,
        Some(start + ms(5_000))
    );
    timer.sleep_until(start + ms(5)).await;
    let took = start.elapsed();
    assert!(took >= ms(5));
    assert!(
        took < ms(2_500),
        "the near sleep waited for the far one: {took:?}"
    );
}

#[tokio::test]
async fn a_dropped_sleep_leaves_the_others_served() {
    let timer = Timer::start(Duration::ZERO).unwrap();
    let start = Instant::now();
    let dropped = tokio::time::timeout(ms(1), timer.sleep_until(start + ms(500))).await;
    assert!(dropped.is_err(), "the 500 ms sleep was cut at 1 ms");
    timer.sleep_until(start + ms(30)).await;
    assert!(start.elapsed() >= ms(30));
}

#[tokio::test]
async fn a_deadline_already_past_is_ready_at_once() {
    let timer = Timer::start(Duration::ZERO).unwrap();
    let before = Instant::now();
    timer.sleep_until(before - ms(1)).await;
    timer.sleep_until(before).await;
    let state = timer.shared.state.lock().unwrap();
    assert!(
        state.sleepers.next_at().is_none(),
        "nothing went into the wheel"
    );
}
