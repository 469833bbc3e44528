//! The few numerical searches the fits need, small enough to read and
//! test here rather than bring in a fitting crate: a straight line by
//! least squares with a non-negative slope, golden-section search on an
//! interval (after a scan, so that a function with several dips is not
//! refined in the wrong one), and Nelder-Mead's simplex for the
//! Universal Scalability Law's two shape coefficients.

/// Least squares of `y = a + k x` with `k >= 0`: `(a, k, sum of squared
/// residuals)`. Where the unconstrained slope would be negative, or every
/// `x` is the same, the best line with `k = 0` is the mean of `y`.
pub(crate) fn line(x: &[f64], y: &[f64]) -> (f64, f64, f64) {
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let sxx: f64 = x.iter().map(|xi| (xi - mx).powi(2)).sum();
    let sxy: f64 = x.iter().zip(y).map(|(xi, yi)| (xi - mx) * (yi - my)).sum();
    let k = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
    let a = my - k * mx;
    let sse = x
        .iter()
        .zip(y)
        .map(|(xi, yi)| (yi - a - k * xi).powi(2))
        .sum();
    (a, k, sse)
}

/// The minimum of `f` on `[lo, hi]` by golden-section search, assuming
/// one dip there: `(x, f(x))`, `x` within `tol` of the dip.
pub(crate) fn golden(f: impl Fn(f64) -> f64, lo: f64, hi: f64, tol: f64) -> (f64, f64) {
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (lo, hi);
    let mut c = b - ratio * (b - a);
    let mut d = a + ratio * (b - a);
    let (mut fc, mut fd) = (f(c), f(d));
    while b - a > tol {
        if fc <= fd {
            b = d;
            d = c;
            fd = fc;
            c = b - ratio * (b - a);
            fc = f(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + ratio * (b - a);
            fd = f(d);
        }
    }
    let x = (a + b) / 2.0;
    let fx = f(x);
    // The ends may be lower than any interior point seen (a dip at an end).
    [(x, fx), (lo, f(lo)), (hi, f(hi))]
        .into_iter()
        .min_by(|p, q| p.1.total_cmp(&q.1))
        .expect("three candidates")
}

/// The minimum of `f` on `[lo, hi]`: `steps + 1` evenly spaced points
/// scanned, then golden-section search between the best point's
/// neighbours. Finds the lowest dip wider than a step.
pub(crate) fn scan_golden(
    f: impl Fn(f64) -> f64,
    lo: f64,
    hi: f64,
    steps: usize,
    tol: f64,
) -> (f64, f64) {
    let step = (hi - lo) / steps as f64;
    let best = (0..=steps)
        .map(|i| lo + step * i as f64)
        .map(|x| (x, f(x)))
        .min_by(|p, q| p.1.total_cmp(&q.1))
        .expect("at least one point");
    let left = (best.0 - step).max(lo);
    let right = (best.0 + step).min(hi);
    let refined = golden(&f, left, right, tol);
    if refined.1 <= best.1 { refined } else { best }
}

/// Nelder-Mead's simplex search for a minimum of `f` near `start`, the
/// first simplex `start` and `start` moved by `step[i]` along each axis;
/// stops when the simplex's values differ by less than `tol` or after
/// `max_evals` evaluations. The usual coefficients: reflection 1,
/// expansion 2, contraction 1/2, shrink 1/2. Bounds are the caller's:
/// `f` sees any point, so it should project it onto its domain.
pub(crate) fn nelder_mead(
    f: impl Fn(&[f64]) -> f64,
    start: &[f64],
    step: &[f64],
    tol: f64,
    max_evals: usize,
) -> (Vec<f64>, f64) {
    let dim = start.len();
    let evals = std::cell::Cell::new(0);
    let eval = |x: &[f64]| {
        evals.set(evals.get() + 1);
        f(x)
    };
    let mut simplex: Vec<(Vec<f64>, f64)> = (0..=dim)
        .map(|i| {
            let mut x = start.to_vec();
            if i > 0 {
                x[i - 1] += step[i - 1];
            }
            let fx = eval(&x);
            (x, fx)
        })
        .collect();
    let toward = |from: &[f64], to: &[f64], t: f64| -> Vec<f64> {
        from.iter().zip(to).map(|(a, b)| a + t * (b - a)).collect()
    };
    loop {
        simplex.sort_by(|p, q| p.1.total_cmp(&q.1));
        let spread = simplex[dim].1 - simplex[0].1;
        if spread.abs() <= tol || evals.get() >= max_evals {
            break;
        }
        let centroid: Vec<f64> = (0..dim)
            .map(|j| simplex[..dim].iter().map(|p| p.0[j]).sum::<f64>() / dim as f64)
            .collect();
        let worst = simplex[dim].clone();
        let reflected = toward(&worst.0, &centroid, 2.0);
        let fr = eval(&reflected);
        if fr < simplex[0].1 {
            let expanded = toward(&worst.0, &centroid, 3.0);
            let fe = eval(&expanded);
            simplex[dim] = if fe < fr {
                (expanded, fe)
            } else {
                (reflected, fr)
            };
        } else if fr < simplex[dim - 1].1 {
            simplex[dim] = (reflected, fr);
        } else {
            // Contract towards the better of the worst and its reflection.
            let (base, fbase) = if fr < worst.1 {
                (&reflected, fr)
            } else {
                (&worst.0, worst.1)
            };
            let contracted = toward(&centroid, base, 0.5);
            let fc = eval(&contracted);
            if fc < fbase {
                simplex[dim] = (contracted, fc);
            } else {
                let best = simplex[0].0.clone();
                for p in simplex.iter_mut().skip(1) {
                    p.0 = toward(&best, &p.0, 0.5);
                    p.1 = eval(&p.0);
                }
            }
        }
    }
    simplex.swap_remove(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_through_points_and_a_flat_one_where_it_would_fall() {
        // y = 1 + 2x exactly.
        let (a, k, sse) = line(&[0.0, 1.0, 2.0, 3.0], &[1.0, 3.0, 5.0, 7.0]);
        assert!((a - 1.0).abs() < 1e-12 && (k - 2.0).abs() < 1e-12 && sse < 1e-20);
        // Points 1, 2 around x = 0, 2: the line y = 1 + x/2 misses each of
        // (0, 1), (1, 2), (2, 2) by -1/6, +1/3, -1/6 (by hand).
        let (a, k, sse) = line(&[0.0, 1.0, 2.0], &[1.0, 2.0, 2.0]);
        assert!((a - 7.0 / 6.0).abs() < 1e-12, "{a}");
        assert!((k - 0.5).abs() < 1e-12, "{k}");
        assert!((sse - 1.0 / 6.0).abs() < 1e-12, "{sse}");
        // A falling cloud: the slope stops at zero, the line at the mean.
        let (a, k, _) = line(&[0.0, 1.0, 2.0], &[3.0, 2.0, 1.0]);
        assert_eq!((a, k), (2.0, 0.0));
        // One x: no slope to fit.
        let (a, k, _) = line(&[4.0, 4.0], &[1.0, 3.0]);
        assert_eq!((a, k), (2.0, 0.0));
    }

    #[test]
    fn golden_section_finds_a_dip_and_an_end() {
        // Near a dip f is flat to the square root of f64's precision.
        let (x, fx) = golden(|x| (x - 0.3).powi(2) + 1.0, 0.0, 1.0, 1e-9);
        assert!((x - 0.3).abs() < 1e-7 && (fx - 1.0).abs() < 1e-12, "{x}");
        // Falling all the way: the right end.
        let (x, _) = golden(|x| -x, 0.0, 2.0, 1e-9);
        assert_eq!(x, 2.0);
    }

    #[test]
    fn a_scan_finds_the_lower_of_two_dips() {
        // Dips at -2 (depth -1) and 3 (depth -2): golden-section alone on
        // [-5, 5] could settle in either.
        let f = |x: f64| -(-(x + 2.0).powi(2) * 4.0).exp() - 2.0 * (-(x - 3.0).powi(2) * 4.0).exp();
        let (x, fx) = scan_golden(f, -5.0, 5.0, 100, 1e-10);
        assert!((x - 3.0).abs() < 1e-3, "{x}");
        assert!((fx + 2.0).abs() < 1e-6, "{fx}");
    }

    #[test]
    fn nelder_mead_finds_a_bowl_and_rosenbrocks_valley() {
        let bowl = |p: &[f64]| (p[0] - 1.0).powi(2) + 10.0 * (p[1] + 2.0).powi(2);
        let (x, fx) = nelder_mead(bowl, &[0.0, 0.0], &[0.5, 0.5], 1e-16, 10_000);
        assert!(
            (x[0] - 1.0).abs() < 1e-6 && (x[1] + 2.0).abs() < 1e-6,
            "{x:?}"
        );
        assert!(fx < 1e-12);
        let rosenbrock = |p: &[f64]| 100.0 * (p[1] - p[0] * p[0]).powi(2) + (1.0 - p[0]).powi(2);
        let (x, _) = nelder_mead(rosenbrock, &[-1.2, 1.0], &[0.1, 0.1], 1e-20, 20_000);
        assert!(
            (x[0] - 1.0).abs() < 1e-4 && (x[1] - 1.0).abs() < 1e-4,
            "{x:?}"
        );
        // The budget is kept, give or take one step's evaluations.
        let calls = std::cell::Cell::new(0);
        let counted = |p: &[f64]| {
            calls.set(calls.get() + 1);
            rosenbrock(p)
        };
        nelder_mead(counted, &[-1.2, 1.0], &[0.1, 0.1], 0.0, 50);
        assert!(calls.get() <= 50 + 4, "{}", calls.get());
    }
}
