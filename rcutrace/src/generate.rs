//! Shell completions and man pages, generated from the clap definitions in `cli` so that they
//! can never disagree with what the binary accepts. `cargo xtask dist` runs
//! `rcutrace generate DIR` to install them next to the binary.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use clap::CommandFactory as _;
use clap_complete::Shell;

use crate::cli::Cli;

/// Shells whose completion scripts are generated, with the sub-directory they go to.
const SHELLS: [(Shell, &str); 3] = [
    (Shell::Bash, "completions/bash"),
    (Shell::Zsh, "completions/zsh"),
    (Shell::Fish, "completions/fish"),
];

/// `rcutrace generate DIR`, recognised before `Cli` parses anything: clap's generators list
/// even hidden commands, and this one is no part of the interface they document.
pub fn requested() -> Option<PathBuf> {
    let mut args = std::env::args_os().skip(1);
    match (args.next(), args.next(), args.next()) {
        (Some(verb), Some(dir), None) if verb == "generate" => Some(dir.into()),
        _ => None,
    }
}

/// Writes `man/man1/rcutrace*.1` (one page per command) and `completions/SHELL/...` under
/// `dir`; returns the files written, relative to `dir`.
pub fn write_all(dir: &Path) -> Result<Vec<String>> {
    let mut written = Vec::new();
    let man_dir = dir.join("man/man1");
    fs::create_dir_all(&man_dir).with_context(|| format!("creating {}", man_dir.display()))?;
    clap_mangen::generate_to(Cli::command(), &man_dir)
        .with_context(|| format!("writing man pages to {}", man_dir.display()))?;
    written.extend(files_in(&man_dir, "man/man1")?);
    for (shell, sub) in SHELLS {
        let shell_dir = dir.join(sub);
        fs::create_dir_all(&shell_dir)
            .with_context(|| format!("creating {}", shell_dir.display()))?;
        let path = clap_complete::generate_to(shell, &mut Cli::command(), "rcutrace", &shell_dir)
            .with_context(|| {
            format!("writing {shell} completions to {}", shell_dir.display())
        })?;
        if let Some(name) = path.file_name() {
            written.push(format!("{sub}/{}", name.to_string_lossy()));
        }
    }
    Ok(written)
}

fn files_in(dir: &Path, prefix: &str) -> Result<Vec<String>> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .flatten()
        .map(|e| format!("{prefix}/{}", e.file_name().to_string_lossy()))
        .collect();
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every visible command gets a page, the hidden generator none; completions know the
    /// commands and their options.
    #[test]
    fn pages_and_completions_cover_every_command() {
        let dir = std::env::temp_dir().join(format!("rcutrace-generate-{}", std::process::id()));
        let written = write_all(&dir).unwrap();
        for page in [
            "man/man1/rcutrace.1",
            "man/man1/rcutrace-count.1",
            "man/man1/rcutrace-gplat.1",
            "man/man1/rcutrace-srlat.1",
            "man/man1/rcutrace-report.1",
            "man/man1/rcutrace-callbacks.1",
        ] {
            assert!(written.iter().any(|w| w == page), "{page}: {written:?}");
        }
        assert!(
            !written.iter().any(|w| w.contains("generate")),
            "{written:?}"
        );
        let srlat = fs::read_to_string(dir.join("man/man1/rcutrace-srlat.1")).unwrap();
        assert!(srlat.contains("expedited"), "{srlat}");
        let bash = fs::read_to_string(dir.join("completions/bash/rcutrace.bash")).unwrap();
        for word in ["count", "gplat", "srlat", "--attach", "--by"] {
            assert!(bash.contains(word), "{word}");
        }
        assert!(!bash.contains("generate"));
        assert!(dir.join("completions/zsh/_rcutrace").is_file());
        assert!(dir.join("completions/fish/rcutrace.fish").is_file());
        fs::remove_dir_all(&dir).unwrap();
    }
}
