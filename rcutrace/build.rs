//! Builds rcutrace-ebpf for the BPF target and leaves the object in OUT_DIR for embedding.
//!
//! Where the eBPF toolchain is missing, debug builds (check, clippy, unit tests) get an empty
//! stub object and a warning; the binary then refuses to trace. Release builds fail instead,
//! so a stub can never ship.

use std::{
    env, fs,
    path::{Path, PathBuf},
};

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
    .context("building the eBPF programs (scripts/setup installs the toolchain)")?;
    let object = PathBuf::from(env::var("OUT_DIR")?).join(OBJECT_NAME);
    strip_dwarf(&object).with_context(|| format!("stripping DWARF from {}", object.display()))
}

/// Drops the DWARF sections (and their relocations) from the eBPF object. bpf-linker needs the
/// DWARF to write the object's BTF, and nothing reads it after that; left in, it would be two
/// thirds of the object embedded in rcutrace, and aya would read its relocations at every
/// start. The BTF (`.BTF`, `.BTF.ext`) stays.
fn strip_dwarf(path: &Path) -> anyhow::Result<()> {
    let data = fs::read(path)?;
    let mut elf = object::build::elf::Builder::read(data.as_slice())?;
    for section in elf.sections.iter_mut() {
        let name: &[u8] = &section.name;
        if name.starts_with(b".debug_") || name.starts_with(b".rel.debug_") {
            section.delete = true;
        }
    }
    elf.delete_orphans();
    // bpf-linker names the sections in the symbols' string table; the writer wants a table of
    // their own.
    let names = elf.sections.add();
    names.name = b".shstrtab"[..].into();
    names.sh_type = object::elf::SHT_STRTAB;
    names.sh_addralign = 1;
    names.data = object::build::elf::SectionData::SectionString;
    let mut stripped = Vec::new();
    elf.write(&mut stripped)?;
    fs::write(path, stripped)?;
    Ok(())
}

fn which_bpf_linker() -> Option<PathBuf> {
    env::split_paths(&env::var_os("PATH")?)
        .map(|dir| dir.join("bpf-linker"))
        .find(|candidate| candidate.is_file())
}
