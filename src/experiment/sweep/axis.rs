//! The settings a sweep may vary, as axes of its maps.

use std::collections::BTreeSet;

use super::findings::Key;

/// The settings that may vary, in the order they are named.
const AXES: [Axis; 4] = [Axis::Clients, Axis::Think, Axis::Timeout, Axis::Limit];

/// A setting a sweep may vary besides the pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Axis {
    Clients,
    Think,
    Timeout,
    Limit,
}

impl Axis {
    /// The setting's value, as shown.
    pub fn value(self, k: &Key) -> String {
        match self {
            Axis::Clients => k.clients.to_string(),
            Axis::Think => k.lambda_s.map_or("-".into(), |t| t.to_string()),
            Axis::Timeout => k.timeout_s.to_string(),
            Axis::Limit => k.limit.to_string(),
        }
    }

    /// The setting's value as a number to order by (a case's own think
    /// time first).
    pub fn number(self, k: &Key) -> f64 {
        match self {
            Axis::Clients => f64::from(k.clients),
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
            Axis::Think => format!("think {v} s"),
            Axis::Timeout => format!("timeout {v} s"),
            Axis::Limit => format!("limit {v}"),
        }
    }

    /// What the setting is, for an axis.
    pub fn name(self) -> &'static str {
        match self {
            Axis::Clients => "clients",
            Axis::Think => "mean think time (s)",
            Axis::Timeout => "client timeout (s)",
            Axis::Limit => "server limit",
        }
    }
}

/// The settings that take more than one value among `keys`.
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

/// `key`'s case, with the values of `axes`: a panel's title.
pub(super) fn title(key: &Key, axes: &[Axis]) -> String {
    let mut title = key.case.to_string();
    for axis in axes {
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
            clients,
            lambda_s: None,
            timeout_s,
            limit: 30,
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
}
