//! Refusing a flag that was given but does not apply to the choice made,
//! with a message that says where it applies.

/// The message for a flag given that does not apply to the choice made:
/// `flag` does not apply to `option choice`, only to `applies`.
pub(super) fn stray<'a>(
    flag: &str,
    option: &str,
    choice: &str,
    applies: impl IntoIterator<Item = &'a str>,
) -> String {
    let applies: Vec<&str> = applies.into_iter().collect();
    let to = if applies.is_empty() {
        "nothing".to_string()
    } else {
        applies.join(", ")
    };
    format!("{flag} does not apply to {option} {choice} (it applies to: {to})")
}

/// Refuses flags that were given but do not apply to the choice made:
/// `flags` lists (flag, given, the choices it applies to).
pub(super) fn refuse_strays(
    flags: &[(&str, bool, &[&str])],
    choice: &str,
    option: &str,
) -> Result<(), String> {
    match flags
        .iter()
        .find(|(_, given, applies)| *given && !applies.contains(&choice))
    {
        Some((flag, _, applies)) => Err(stray(flag, option, choice, applies.iter().copied())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stray_flag_is_named_with_where_it_applies() {
        assert_eq!(
            refuse_strays(&[("--a", true, &["x"]), ("--b", true, &[])], "y", "--mode"),
            Err("--a does not apply to --mode y (it applies to: x)".to_string())
        );
        assert_eq!(
            refuse_strays(&[("--b", true, &[])], "y", "--mode"),
            Err("--b does not apply to --mode y (it applies to: nothing)".to_string())
        );
        assert_eq!(
            refuse_strays(&[("--a", true, &["y"])], "y", "--mode"),
            Ok(())
        );
        assert_eq!(
            refuse_strays(&[("--a", false, &["x"])], "y", "--mode"),
            Ok(())
        );
    }
}
