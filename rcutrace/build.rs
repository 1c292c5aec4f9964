//! Builds rcutrace-ebpf for the BPF target and leaves the object in OUT_DIR for embedding.
//!
//! Where the eBPF toolchain is missing, debug builds (check, clippy, unit tests) get an empty
//! stub object and a warning; the binary then refuses to trace. Release builds fail instead,
//! so a stub can never ship.

use std::{env, fs, path::PathBuf};

use anyhow::{Context as _, anyhow};

const EBPF_PACKAGE: &str = "rcutrace-ebpf";
const OBJECT_NAME: &str = "rcutrace";

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=RCUTRACE_EBPF_STUB");
    println!("cargo:rustc-check-cfg=cfg(rcutrace_ebpf_stub)");
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?);
    let ebpf_dir = manifest_dir
        .parent()
        .ok_or_else(|| anyhow!("workspace root not found"))?
        .join(EBPF_PACKAGE);

    let stub_requested = env::var_os("RCUTRACE_EBPF_STUB").is_some_and(|v| v == "1");
    let toolchain_missing = which_bpf_linker().is_none();
    if stub_requested || toolchain_missing {
        let why = if stub_requested {
            "RCUTRACE_EBPF_STUB=1"
        } else {
            "bpf-linker is not on PATH (run scripts/setup)"
        };
        if env::var("PROFILE").as_deref() == Ok("release") {
            return Err(anyhow!(
                "cannot build the eBPF programs for a release binary: {why}"
            ));
        }
        println!("cargo:warning=eBPF programs NOT built ({why}); this rcutrace cannot trace");
        println!("cargo:rustc-cfg=rcutrace_ebpf_stub");
        let out_dir = PathBuf::from(env::var("OUT_DIR")?);
        fs::write(out_dir.join(OBJECT_NAME), []).context("writing the stub eBPF object")?;
        return Ok(());
    }

    // aya-build passes every line the inner cargo prints up as a `cargo:warning`, its progress
    // ("Compiling ...") included; a quiet inner cargo leaves only real warnings and errors.
    // SAFETY: the build script has not started any other thread yet.
    unsafe { env::set_var("CARGO_TERM_QUIET", "true") };
    let ebpf_dir = ebpf_dir
        .to_str()
        .ok_or_else(|| anyhow!("non-UTF-8 path {}", ebpf_dir.display()))?;
    aya_build::build_ebpf(
        [aya_build::Package {
            name: EBPF_PACKAGE,
            root_dir: ebpf_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
    .context("building the eBPF programs (scripts/setup installs the toolchain)")
}

fn which_bpf_linker() -> Option<PathBuf> {
    env::split_paths(&env::var_os("PATH")?)
        .map(|dir| dir.join("bpf-linker"))
        .find(|candidate| candidate.is_file())
}
