//! Where things live in the workspace.

use std::path::{Path, PathBuf};

/// The workspace root: the parent of this crate's manifest directory.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

/// Cargo's target directory, honouring `CARGO_TARGET_DIR` like cargo does.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root().join(dir),
        _ => root().join("target"),
    }
}

/// Where scripts/setup unpacks the Debian kernels (always under the workspace's own target/).
pub fn kernels_dir() -> PathBuf {
    root().join("target").join("kernels")
}

/// Scratch space for initramfs images and per-run logs.
pub fn vm_dir() -> PathBuf {
    target_dir().join("vm")
}

/// Path of a binary in the release profile's output directory.
pub fn release_binary(name: &str) -> PathBuf {
    target_dir().join("release").join(name)
}

/// Path of a binary built in the release profile for another target (`--target TARGET`).
pub fn release_binary_for(target: &str, name: &str) -> PathBuf {
    target_dir().join(target).join("release").join(name)
}

/// Where `cargo xtask dist` puts what it builds for installation.
pub fn dist_dir() -> PathBuf {
    target_dir().join("dist")
}

pub fn setup_script() -> PathBuf {
    root().join("scripts").join("setup")
}
