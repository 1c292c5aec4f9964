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
use object::build::elf::{Builder, SectionData};

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
    slim(&object).with_context(|| format!("slimming {}", object.display()))
}

/// Takes out of the eBPF object what nothing needs once bpf-linker has made its BTF, but aya
/// would read at every start: the DWARF, two thirds of the object (bpf-linker makes the BTF
/// from it), and the BTF's line information (the source line of each instruction, which only
/// annotates verifier logs; aya 0.14 parses it and its ~23,000 relocations, most of the
/// object's parse time). The BTF and its function information stay.
fn slim(path: &Path) -> anyhow::Result<()> {
    let data = fs::read(path)?;
    let mut elf = object::build::elf::Builder::read(data.as_slice())?;
    strip_dwarf(&mut elf);
    if let Err(e) = drop_line_info(&mut elf) {
        println!("cargo:warning=the eBPF object keeps its BTF line information: {e:#}");
    }
    // bpf-linker names the sections in the symbols' string table; the writer wants a table of
    // their own.
    let names = elf.sections.add();
    names.name = b".shstrtab"[..].into();
    names.sh_type = object::elf::SHT_STRTAB;
    names.sh_addralign = 1;
    names.data = SectionData::SectionString;
    let mut slimmed = Vec::new();
    elf.write(&mut slimmed)?;
    fs::write(path, slimmed)?;
    Ok(())
}

/// Deletes the DWARF sections and their relocations.
fn strip_dwarf(elf: &mut Builder<'_>) {
    for section in elf.sections.iter_mut() {
        let name: &[u8] = &section.name;
        if name.starts_with(b".debug_") || name.starts_with(b".rel.debug_") {
            section.delete = true;
        }
    }
    elf.delete_orphans();
}

/// Empties `.BTF.ext`'s line information (`struct btf_ext_header` in the kernel's
/// include/uapi/linux/btf.h) and drops the relocations into it. bpf-linker writes it last,
/// after the function information, with no CO-RE relocations; any other layout is left alone.
fn drop_line_info(elf: &mut Builder<'_>) -> anyhow::Result<()> {
    let ext = elf
        .sections
        .iter_mut()
        .find(|section| &*section.name == b".BTF.ext")
        .ok_or_else(|| anyhow!("no .BTF.ext section"))?;
    let SectionData::Data(bytes) = &ext.data else {
        return Err(anyhow!(".BTF.ext holds no data"));
    };
    let mut data = bytes.to_vec();
    let field = |at: usize| {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let header = field(4).ok_or_else(|| anyhow!("short .BTF.ext header"))?;
    let (Some(line_at), Some(line_len), Some(core_len)) = (field(16), field(20), field(28)) else {
        return Err(anyhow!("a .BTF.ext header of {header} bytes"));
    };
    let lines = header + line_at..header + line_at + line_len;
    if header < 32 || lines.end != data.len() || core_len != 0 {
        return Err(anyhow!(
            "line information at {lines:?} of {} bytes, {core_len} bytes of CO-RE relocations",
            data.len()
        ));
    }
    data.truncate(lines.start);
    // No line information; the (empty) CO-RE relocations start where it did.
    data[20..24].copy_from_slice(&0u32.to_le_bytes());
    data[24..28].copy_from_slice(&(line_at as u32).to_le_bytes());
    ext.data = SectionData::Data(data.into());
    let ext = ext.id();
    for section in elf.sections.iter_mut() {
        if section.sh_info_section == Some(ext)
            && let SectionData::Relocation(relocations) = &mut section.data
        {
            relocations.retain(|r| r.r_offset < lines.start as u64);
        }
    }
    Ok(())
}

fn which_bpf_linker() -> Option<PathBuf> {
    env::split_paths(&env::var_os("PATH")?)
        .map(|dir| dir.join("bpf-linker"))
        .find(|candidate| candidate.is_file())
}
