//! Kernel addresses to names: `function_name` for a function pointer (`name`, or
//! `name [module]` for a module's function) and `frame` for a stack frame (`name+offset`, as
//! bpftrace's `kstack` prints it). Names come from /proc/kallsyms through blazesym; the module
//! an address belongs to from /proc/modules (kallsyms' `[module]` column is not kept by
//! blazesym). An address nothing knows prints as hex, never as an error.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use blazesym::{
    MaybeDefault,
    symbolize::{
        Input, Symbolized, Symbolizer as Blazesym,
        source::{Kernel, Source},
    },
};

/// A loaded module's text and data, `[start, end)`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Module {
    name: String,
    start: u64,
    end: u64,
}

pub struct Symbolizer {
    blazesym: Blazesym,
    source: Source<'static>,
    modules: Vec<Module>,
}

impl Symbolizer {
    /// The running kernel's symbols (needs root to see real addresses).
    pub fn new() -> Result<Self> {
        Self::from_files(Path::new("/proc/kallsyms"), Path::new("/proc/modules"))
    }

    /// Symbols from a kallsyms and a modules file (the running kernel's, or copies).
    pub fn from_files(kallsyms: &Path, modules: &Path) -> Result<Self> {
        let modules_text = fs::read_to_string(modules)
            .with_context(|| format!("reading {}", modules.display()))?;
        let kernel = Kernel {
            kallsyms: MaybeDefault::Some(PathBuf::from(kallsyms)),
            // kallsyms names every function; a vmlinux search would only cost time.
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Default::default()
        };
        Ok(Symbolizer {
            blazesym: Blazesym::new(),
            source: Source::Kernel(kernel),
            modules: parse_modules(&modules_text),
        })
    }

    /// `(name, offset)` of the symbol that holds `addr`.
    fn symbol(&self, addr: u64) -> Option<(String, u64)> {
        match self
            .blazesym
            .symbolize_single(&self.source, Input::AbsAddr(addr))
        {
            Ok(Symbolized::Sym(sym)) => Some((sym.name.into_owned(), sym.offset as u64)),
            Ok(Symbolized::Unknown(reason)) => {
                log::debug!("{addr:#x}: not symbolized ({reason})");
                None
            }
            Err(e) => {
                log::debug!("{addr:#x}: not symbolized ({e})");
                None
            }
        }
    }

    /// The module whose memory holds `addr`, if any.
    pub fn module(&self, addr: u64) -> Option<&str> {
        self.modules
            .iter()
            .find(|m| (m.start..m.end).contains(&addr))
            .map(|m| m.name.as_str())
    }

    /// A function pointer's name: `name`, `name [module]`, or `0x...` if unknown.
    pub fn function_name(&self, addr: u64) -> String {
        let Some((name, _)) = self.symbol(addr) else {
            return format!("{addr:#x}");
        };
        match self.module(addr) {
            Some(module) => format!("{name} [{module}]"),
            None => name,
        }
    }

    /// A stack frame as bpftrace's `kstack` prints it, `name+offset` (decimal), with
    /// ` [module]` for a module's function; `0x...` if unknown.
    pub fn frame(&self, addr: u64) -> String {
        let Some((name, offset)) = self.symbol(addr) else {
            return format!("{addr:#x}");
        };
        match self.module(addr) {
            Some(module) => format!("{name}+{offset} [{module}]"),
            None => format!("{name}+{offset}"),
        }
    }
}

/// /proc/modules lines: `name size refcount deps state address [taint]`.
fn parse_modules(text: &str) -> Vec<Module> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let name = fields.first()?;
            let size: u64 = fields.get(1)?.parse().ok()?;
            let start = u64::from_str_radix(fields.get(5)?.trim_start_matches("0x"), 16).ok()?;
            // Without root the kernel shows every address as zero.
            (start != 0).then(|| Module {
                name: name.to_string(),
                start,
                end: start + size,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81100000 T call_rcu
ffffffff81100040 t rcu_work_rcufn
ffffffff81100100 T kvfree_call_rcu
ffffffffc0400000 t rcutrace_test_cb\t[rcutrace_test]
ffffffffc0400080 t rcutrace_test_hurry_cb\t[rcutrace_test]
";
    const MODULES: &str = "\
rcutrace_test 16384 0 - Live 0xffffffffc0400000 (OE)
virtio_net 65536 0 - Live 0xffffffffc0500000
hidden 4096 0 - Live 0x0000000000000000
";

    /// A symbolizer over the test files, in a folder of the calling test's own (tests run in
    /// parallel, and one test rewriting the files under another's symbolizer breaks it).
    fn symbolizer(test: &str) -> Symbolizer {
        let dir =
            std::env::temp_dir().join(format!("rcutrace-symbols-{}-{test}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let (kallsyms, modules) = (dir.join("kallsyms"), dir.join("modules"));
        fs::write(&kallsyms, KALLSYMS).unwrap();
        fs::write(&modules, MODULES).unwrap();
        Symbolizer::from_files(&kallsyms, &modules).unwrap()
    }

    #[test]
    fn functions_are_named_with_their_module() {
        let s = symbolizer("functions_are_named_with_their_module");
        assert_eq!(s.function_name(0xffffffff81100000), "call_rcu");
        assert_eq!(s.function_name(0xffffffff81100040), "rcu_work_rcufn");
        assert_eq!(
            s.function_name(0xffffffffc0400080),
            "rcutrace_test_hurry_cb [rcutrace_test]"
        );
        assert_eq!(s.module(0xffffffffc0503fff), Some("virtio_net"));
        assert_eq!(s.module(0xffffffff81100000), None);
    }

    #[test]
    fn frames_are_name_plus_decimal_offset() {
        let s = symbolizer("frames_are_name_plus_decimal_offset");
        assert_eq!(s.frame(0xffffffff81100005), "call_rcu+5");
        assert_eq!(s.frame(0xffffffff81100150), "kvfree_call_rcu+80");
        assert_eq!(
            s.frame(0xffffffffc0400010),
            "rcutrace_test_cb+16 [rcutrace_test]"
        );
    }

    #[test]
    fn unknown_addresses_print_as_hex() {
        let s = symbolizer("unknown_addresses_print_as_hex");
        assert_eq!(s.function_name(0x1000), "0x1000");
        assert_eq!(s.frame(0), "0x0");
    }

    #[test]
    fn modules_without_addresses_are_ignored() {
        let modules = parse_modules(MODULES);
        assert_eq!(modules.len(), 2);
        assert_eq!(modules[0].end, 0xffffffffc0400000 + 16384);
    }
}
