//! `cargo xtask dist`: everything an installation needs, in one directory: the static
//! rcutrace (its eBPF programs embedded), man pages and shell completions generated from its
//! own command-line definitions.

use std::{fs, path::PathBuf, process::Command};

use anyhow::{Context as _, Result, bail};

use crate::{build, workspace};

/// What was put where.
pub struct Dist {
    pub dir: PathBuf,
    /// Paths relative to `dir`, the binary first.
    pub files: Vec<String>,
}

/// Builds the static rcutrace and fills `target/dist/` afresh.
pub fn run() -> Result<Dist> {
    let binary = build::build_rcutrace()?;
    let dir = workspace::dist_dir();
    if dir.exists() {
        fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let installed = dir.join(build::RCUTRACE_BIN);
    fs::copy(&binary, &installed)
        .with_context(|| format!("copying {} to {}", binary.display(), dir.display()))?;
    // The binary writes its own pages and completions, from the definitions it parses with.
    let out = Command::new(&installed)
        .arg("generate")
        .arg(&dir)
        .output()
        .with_context(|| format!("running {}", installed.display()))?;
    if !out.status.success() {
        bail!(
            "`rcutrace generate` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut files = vec![build::RCUTRACE_BIN.to_string()];
    files.extend(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from),
    );
    Ok(Dist { dir, files })
}
