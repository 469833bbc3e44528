//! Man pages and shell completions, generated from the same clap
//! definitions as the flags themselves (as ripgrep's `--generate` does).

use std::io::{self, Write};

use clap::{Args, ValueEnum};
use clap_complete::Shell;

/// What `--generate` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Generate {
    /// The program's (or subcommand's) man page, in roff.
    Man,
    /// Completions for bash.
    CompleteBash,
    /// Completions for zsh.
    CompleteZsh,
    /// Completions for fish.
    CompleteFish,
    /// Completions for elvish.
    CompleteElvish,
    /// Completions for PowerShell.
    CompletePowershell,
}

/// The `--generate` flag every program and subcommand has.
#[derive(Debug, Clone, Args)]
pub struct GenerateArgs {
    /// Print a man page (man) or the program's shell completions
    /// (complete-bash, complete-zsh, complete-fish, complete-elvish,
    /// complete-powershell) instead of running.
    #[arg(long, value_enum, value_name = "KIND")]
    pub generate: Option<Generate>,
}

impl Generate {
    /// Writes the man page of `page` (named `name`: `storm-sweep` for a
    /// subcommand), or the completions of the whole program `program`
    /// (invoked as `bin`), to `out`.
    pub fn write(
        self,
        page: clap::Command,
        name: &'static str,
        mut program: clap::Command,
        bin: &str,
        out: &mut impl Write,
    ) -> io::Result<()> {
        let shell = match self {
            Generate::Man => {
                return clap_mangen::Man::new(page.name(name)).render(out);
            }
            Generate::CompleteBash => Shell::Bash,
            Generate::CompleteZsh => Shell::Zsh,
            Generate::CompleteFish => Shell::Fish,
            Generate::CompleteElvish => Shell::Elvish,
            Generate::CompletePowershell => Shell::PowerShell,
        };
        clap_complete::generate(shell, &mut program, bin, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{ClientCli, ServerArgs, StormCli};
    use clap::CommandFactory;

    fn text(kind: Generate, page: clap::Command, name: &'static str, bin: &str) -> String {
        let program = page.clone();
        let mut out = Vec::new();
        kind.write(page, name, program, bin, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn man_pages_hold_every_visible_flag_of_their_program() {
        let man = text(Generate::Man, ServerArgs::command(), "server", "server");
        assert!(
            man.starts_with(".ie") || man.contains(".TH server"),
            "{man}"
        );
        for flag in ["listen", "shed\\-above", "on\\-disconnect", "time\\-scale"] {
            assert!(man.contains(flag), "server.1 lacks {flag}");
        }
        assert!(
            !man.contains("status\\-fd"),
            "hidden flags stay out of the page"
        );
        let client = ClientCli::command();
        let plan = client.find_subcommand("plan").unwrap().clone();
        let man = text(Generate::Man, plan, "client-plan", "client");
        assert!(man.contains(".TH client-plan") && man.contains("target\\-ratio"));
    }

    #[test]
    fn completions_cover_subcommands_and_values() {
        let bash = text(
            Generate::CompleteBash,
            StormCli::command(),
            "storm",
            "storm",
        );
        for word in [
            "sweep",
            "run",
            "--strategies",
            "exponential-2014",
            "--engine",
        ] {
            assert!(bash.contains(word), "bash completions lack {word}");
        }
        let zsh = text(
            Generate::CompleteZsh,
            ClientCli::command(),
            "client",
            "client",
        );
        assert!(zsh.contains("#compdef client") && zsh.contains("--throttle"));
        for kind in [
            Generate::CompleteFish,
            Generate::CompleteElvish,
            Generate::CompletePowershell,
        ] {
            assert!(text(kind, ServerArgs::command(), "server", "server").contains("listen"));
        }
    }
}
