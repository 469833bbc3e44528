//! The settings a sweep may vary, as axes of its maps.

use std::collections::{BTreeMap, BTreeSet};

use super::findings::Key;

/// The settings that may vary, in the order they are named.
const AXES: [Axis; 5] = [
    Axis::Clients,
    Axis::Rate,
    Axis::Think,
    Axis::Timeout,
    Axis::Limit,
];

/// A setting a sweep may vary besides the pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Axis {
    Clients,
    Rate,
    Think,
    Timeout,
    Limit,
}

impl Axis {
    /// The setting's value, as shown (a dash where it does not apply:
    /// clients under open traffic, a rate under closed).
    pub fn value(self, k: &Key) -> String {
        match self {
            Axis::Clients => k.clients.map_or("-".into(), |n| n.to_string()),
            Axis::Rate => k.arrival_rate.map_or("-".into(), |r| r.to_string()),
            Axis::Think => k.lambda_s.map_or("-".into(), |t| t.to_string()),
            Axis::Timeout => k.timeout_s.to_string(),
            Axis::Limit => k.limit.to_string(),
        }
    }

    /// The setting's value as a number to order by (a case's own think
    /// time first, and a load that does not apply).
    pub fn number(self, k: &Key) -> f64 {
        match self {
            Axis::Clients => k.clients.map_or(f64::NEG_INFINITY, f64::from),
            Axis::Rate => k.arrival_rate.unwrap_or(f64::NEG_INFINITY),
            Axis::Think => k.lambda_s.unwrap_or(f64::NEG_INFINITY),
            Axis::Timeout => k.timeout_s,
            Axis::Limit => k.limit as f64,
        }
    }

    /// The setting with its value, for a label.
    pub fn describe(self, k: &Key) -> String {
        let v = self.value(k);
        match self {
            Axis::Clients => format!("{v} clients"),
            Axis::Rate => format!("{v} arrivals/s"),
            Axis::Think => format!("think {v} s"),
            Axis::Timeout => format!("timeout {v} s"),
            Axis::Limit => format!("limit {v}"),
        }
    }

    /// What the setting is, for an axis.
    pub fn name(self) -> &'static str {
        match self {
            Axis::Clients => "clients",
            Axis::Rate => "arrival rate (/s)",
            Axis::Think => "mean think time (s)",
            Axis::Timeout => "client timeout (s)",
            Axis::Limit => "server limit",
        }
    }

    /// Whether the setting applies to `k`: clients to a closed population
    /// only, a rate to open traffic only.
    pub fn applies(self, k: &Key) -> bool {
        match self {
            Axis::Clients => k.clients.is_some(),
            Axis::Rate => k.arrival_rate.is_some(),
            Axis::Think | Axis::Timeout | Axis::Limit => true,
        }
    }
}

/// The settings that take more than one value among `keys`, a dash (where
/// one does not apply) counting as a value: what a label names.
pub(super) fn varying(keys: &[Key]) -> Vec<Axis> {
    AXES.into_iter()
        .filter(|a| {
            keys.iter()
                .map(|k| a.value(k))
                .collect::<BTreeSet<_>>()
                .len()
                > 1
        })
        .collect()
}

/// The settings that take more than one value within one case among
/// `keys`: what a map lays out. Where every case has every setting these
/// are the [`varying`] ones; a case with its own arrival rate has one
/// load, whatever the other cases' loads.
pub(super) fn swept(keys: &[Key]) -> Vec<Axis> {
    AXES.into_iter()
        .filter(|a| {
            let mut values: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
            for k in keys {
                values.entry(k.case).or_default().insert(a.value(k));
            }
            values.values().any(|v| v.len() > 1)
        })
        .collect()
}

/// `axes` but those in `skip`.
pub(super) fn except(axes: &[Axis], skip: &[Axis]) -> Vec<Axis> {
    axes.iter().copied().filter(|a| !skip.contains(a)).collect()
}

/// `key`'s case, with the values of those of `axes` that apply to it: a
/// panel's title.
pub(super) fn title(key: &Key, axes: &[Axis]) -> String {
    let mut title = key.case.to_string();
    for axis in axes.iter().filter(|a| a.applies(key)) {
        title.push_str(&format!(", {}", axis.describe(key)));
    }
    title
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(clients: u32, timeout_s: f64) -> Key<'static> {
        Key {
            case: "fixed",
            clients: Some(clients),
            arrival_rate: None,
            lambda_s: None,
            timeout_s,
            limit: 30,
        }
    }

    fn open(case: &'static str, rate: f64) -> Key<'static> {
        Key {
            case,
            clients: None,
            arrival_rate: Some(rate),
            ..key(0, 2.0)
        }
    }

    #[test]
    fn only_settings_with_several_values_vary_in_the_order_named() {
        let keys = [key(500, 4.0), key(250, 2.0), key(500, 2.0)];
        assert_eq!(varying(&keys), vec![Axis::Clients, Axis::Timeout]);
        assert!(varying(&keys[..1]).is_empty());
        assert_eq!(title(&keys[0], &[Axis::Timeout]), "fixed, timeout 4 s");
        assert_eq!(Axis::Think.number(&keys[0]), f64::NEG_INFINITY);
    }

    #[test]
    fn the_rate_is_an_axis_of_open_traffic() {
        let keys = [open("open", 100.0), open("open", 12.5)];
        assert_eq!(varying(&keys), vec![Axis::Rate]);
        assert_eq!(swept(&keys), vec![Axis::Rate]);
        assert_eq!(title(&keys[1], &[Axis::Rate]), "open, 12.5 arrivals/s");
        assert_eq!(Axis::Rate.name(), "arrival rate (/s)");
        assert_eq!(Axis::Clients.value(&keys[0]), "-");
        assert_eq!(Axis::Rate.number(&key(500, 2.0)), f64::NEG_INFINITY);
    }

    #[test]
    fn in_a_mixed_sweep_each_case_is_labelled_by_its_own_load() {
        // One closed case at two numbers of clients, one open at its rate.
        let keys = [key(500, 2.0), key(1000, 2.0), open("open", 100.0)];
        assert_eq!(varying(&keys), vec![Axis::Clients, Axis::Rate]);
        // The open case has one load: only the clients are swept.
        assert_eq!(swept(&keys), vec![Axis::Clients]);
        let all = [Axis::Clients, Axis::Rate];
        assert_eq!(title(&keys[0], &all), "fixed, 500 clients");
        assert_eq!(title(&keys[2], &all), "open, 100 arrivals/s");
        assert!(swept(&[key(500, 2.0), open("open", 100.0)]).is_empty());
        assert_eq!(except(&all, &[Axis::Clients]), vec![Axis::Rate]);
    }
}
