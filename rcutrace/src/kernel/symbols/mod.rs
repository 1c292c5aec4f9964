//! Kernel addresses to names, as they were when the addresses were captured:
//! `function_name` for a function pointer (`name`, or `name [module]`) and `frame` for a
//! stack frame (`name+offset`, as bpftrace's `kstack` prints it, with ` [module]` or
//! ` [bpf]` for a module's or generated code's). An address no known symbol covers prints as
//! hex, never as an error and never as a neighbour's offset.
//!
//! Names come from /proc/kallsyms (`table`: each symbol with its extent). Modules and BPF
//! programs come and go while a run traces, and a stack is named after it was captured (at a
//! report, or when `stall` prints): so a `Symbolizer` keeps every snapshot's symbols of what
//! has since gone, and `keeper` takes snapshots while the window is open, whenever something
//! new appears, so that what a stack could have passed through is known before it goes. The
//! snapshots hold only what can go (modules and generated code, a few thousand symbols); the
//! kernel image's own (some 150,000 to 200,000, which never change) are read once, when an
//! address is first looked up, so that a run that names nothing (`stall` with no warning)
//! never holds them.
//!
//! Why not blazesym, the symbolizer rcutrace used before: its kernel source resolves an
//! address from the kallsyms file it is given, at the time of the lookup, to the nearest
//! symbol below without an extent, so a module's or program's address named after it had
//! gone came out as another symbol's offset (`ftrace_trampoline+8275`). Both needs, snapshots
//! kept across unloads and extents bounded by a module's memory or a program's jited length,
//! sit outside what it offers.

pub mod keeper;
pub mod table;

use std::{collections::HashSet, fs, io::BufReader, sync::OnceLock};

use anyhow::{Context as _, Result};

use self::table::{Extents, Symbol, SymbolRef, Table, Which};
use super::bpf_programs;

/// The modules and BPF programs loaded at one time: what tells that kallsyms has something
/// new, without reading it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Presence {
    /// `(name, address)` of each module.
    modules: HashSet<(String, u64)>,
    programs: HashSet<u32>,
}

impl Presence {
    /// The modules loaded now and the BPF programs with ids above `after` (0: all of them),
    /// with /proc/modules' text.
    fn now(after: u32) -> Result<(Presence, String)> {
        let text = fs::read_to_string("/proc/modules").context("reading /proc/modules")?;
        let presence = Presence::of(&text, bpf_programs::ids_after(after));
        Ok((presence, text))
    }

    fn of(modules: &str, programs: impl IntoIterator<Item = u32>) -> Presence {
        Presence {
            modules: table::parse_modules(modules)
                .into_iter()
                .map(|m| (m.name, m.start))
                .collect(),
            programs: programs.into_iter().collect(),
        }
    }

    /// Whether anything is here that `before` did not have (what left needs no new read:
    /// the snapshot that had it still names it).
    fn has_new(&self, before: &Presence) -> bool {
        !self.modules.is_subset(&before.modules) || !self.programs.is_subset(&before.programs)
    }
}

pub struct Symbolizer {
    /// The latest snapshot of what can go.
    current: Table,
    /// The kernel image's own symbols, read on first use (`None`: they could not be read).
    kernel: OnceLock<Option<Table>>,
    /// Symbols of modules and generated code that earlier snapshots had and the latest lacks,
    /// with the extents they had then, the most recently gone last.
    departed: Vec<Symbol>,
    /// What was loaded when `current` was read.
    seen: Presence,
    /// Reads of /proc/kallsyms so far.
    reads: u32,
}

impl Symbolizer {
    /// The running kernel's symbols now (needs root to see real addresses).
    pub fn new() -> Result<Self> {
        let mut symbolizer = Symbolizer {
            current: Table::default(),
            kernel: OnceLock::new(),
            departed: Vec::new(),
            seen: Presence::default(),
            reads: 0,
        };
        symbolizer.read()?;
        Ok(symbolizer)
    }

    /// The kernel image's symbols, read the first time they are wanted.
    fn kernel(&self) -> Option<&Table> {
        self.kernel
            .get_or_init(|| match read_kallsyms(&Extents::default(), Which::Kernel) {
                Ok(table) => {
                    crate::marks::mark(format_args!(
                        "kernel image's symbols read ({} symbols)",
                        table.len()
                    ));
                    Some(table)
                }
                Err(e) => {
                    log::warn!("kernel addresses are shown as hex: {e:#}");
                    None
                }
            })
            .as_ref()
    }

    /// Takes a new snapshot if a module or BPF program appeared since the last one. Always-on
    /// commands look every second, so a look that finds nothing new costs one read of
    /// /proc/modules and one bpf() call: the kernel numbers programs upwards (wrapping only
    /// after 2^31 of them), so a new one has an id above every id seen.
    pub fn refresh(&mut self) -> Result<()> {
        let newest_seen = self.seen.programs.iter().max().copied().unwrap_or(0);
        if Presence::now(newest_seen)?.0.has_new(&self.seen) {
            self.read()?;
        }
        Ok(())
    }

    fn read(&mut self) -> Result<()> {
        let (presence, modules) = Presence::now(0)?;
        let extents = Extents {
            modules: table::parse_modules(&modules),
            bpf_functions: bpf_programs::jited_functions(&Vec::from_iter(
                presence.programs.iter().copied(),
            )),
            page_size: page_size(),
        };
        self.replace(read_kallsyms(&extents, Which::Transient)?, presence);
        self.reads += 1;
        crate::marks::mark(format_args!(
            "kernel symbols read ({} symbols, {} gone kept; read {} times)",
            self.current.len(),
            self.departed.len(),
            self.reads
        ));
        Ok(())
    }

    /// Makes `table` the latest snapshot, keeping what the one before had and it lacks.
    fn replace(&mut self, table: Table, seen: Presence) {
        let gone: Vec<Symbol> = self
            .current
            .transient()
            .filter(|s| !table.has(*s))
            .map(SymbolRef::to_symbol)
            .collect();
        self.departed.extend(gone);
        self.current = table;
        self.seen = seen;
    }

    /// The symbol that held `addr` when it was captured: the latest snapshot's, else the
    /// last one gone that held it. (Memory reused since by something new is named after the
    /// new: a stack captured before the reuse and named after it would need the capture time,
    /// which a kept stack does not carry.)
    fn symbol(&self, addr: u64) -> Option<SymbolRef<'_>> {
        self.current
            .lookup(addr)
            .or_else(|| {
                self.departed
                    .iter()
                    .rev()
                    .find(|s| (s.start..s.end).contains(&addr))
                    .map(Symbol::as_ref)
            })
            .or_else(|| self.kernel()?.lookup(addr))
    }

    /// A function pointer's name: `name`, `name [module]`, or `0x...` if unknown.
    pub fn function_name(&self, addr: u64) -> String {
        match self.symbol(addr) {
            None => unknown(addr),
            Some(s) => match s.owner.bracketed() {
                Some(owner) => format!("{} [{owner}]", s.name),
                None => s.name.to_string(),
            },
        }
    }

    /// A stack frame as bpftrace's `kstack` prints it, `name+offset` (decimal), with
    /// ` [module]` for a module's function; `0x...` if unknown.
    pub fn frame(&self, addr: u64) -> String {
        match self.symbol(addr) {
            None => unknown(addr),
            Some(s) => {
                let offset = addr - s.start;
                match s.owner.bracketed() {
                    Some(owner) => format!("{}+{offset} [{owner}]", s.name),
                    None => format!("{}+{offset}", s.name),
                }
            }
        }
    }
}

/// /proc/kallsyms read a line at a time, keeping `which` of its symbols.
fn read_kallsyms(extents: &Extents, which: Which) -> Result<Table> {
    let file = fs::File::open("/proc/kallsyms").context("opening /proc/kallsyms")?;
    Table::read(BufReader::with_capacity(64 << 10, file), extents, which)
        .context("reading /proc/kallsyms")
}

/// How an address no symbol covers prints.
pub fn unknown(addr: u64) -> String {
    format!("{addr:#x}")
}

fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).unwrap_or(4096)
}

/// A symbolizer over a kallsyms and a modules text (tests).
#[cfg(test)]
fn of_texts(kallsyms: &str, modules: &str, extents: Extents) -> Symbolizer {
    let mut symbolizer = Symbolizer {
        current: Table::default(),
        // The texts' kernel symbols are in `current`.
        kernel: OnceLock::from(Some(Table::default())),
        departed: Vec::new(),
        seen: Presence::default(),
        reads: 0,
    };
    symbolizer.replace(Table::parse(kallsyms, &extents), Presence::of(modules, []));
    symbolizer
}

#[cfg(test)]
mod tests {
    use super::table::tests::{KALLSYMS, MODULES, extents};
    use super::*;

    fn symbolizer() -> Symbolizer {
        of_texts(KALLSYMS, MODULES, extents())
    }

    #[test]
    fn functions_are_named_with_their_module() {
        let s = symbolizer();
        assert_eq!(s.function_name(0xffffffff81100000), "call_rcu");
        assert_eq!(s.function_name(0xffffffff81100040), "rcu_work_rcufn");
        assert_eq!(
            s.function_name(0xffffffffc0400080),
            "rcutrace_test_hurry_cb [rcutrace_test]"
        );
    }

    #[test]
    fn frames_are_name_plus_decimal_offset() {
        let s = symbolizer();
        assert_eq!(s.frame(0xffffffff81100005), "call_rcu+5");
        assert_eq!(s.frame(0xffffffff81100150), "kvfree_call_rcu+80");
        assert_eq!(
            s.frame(0xffffffffc0400010),
            "rcutrace_test_cb+16 [rcutrace_test]"
        );
        assert_eq!(
            s.frame(0xffffffffc0600010),
            "bpf_prog_6deef7357e7b4530_count_calls+16 [bpf]"
        );
    }

    #[test]
    fn unknown_addresses_print_as_hex() {
        let s = symbolizer();
        assert_eq!(s.function_name(0x1000), "0x1000");
        assert_eq!(s.frame(0), "0x0");
        // Beyond every extent: past the kernel's end, past a trampoline's page, past a
        // module's memory, past a BPF program's length.
        assert_eq!(s.frame(0xffffffff82000010), "0xffffffff82000010");
        assert_eq!(s.frame(0xffffffffc0202053), "0xffffffffc0202053");
        assert_eq!(s.frame(0xffffffffc0404000), "0xffffffffc0404000");
        assert_eq!(s.function_name(0xffffffffc0600090), "0xffffffffc0600090");
    }

    /// The issue this design answers: a module's function on a stack, the module unloaded
    /// before the stack is named, and a new snapshot (something else appeared) without it.
    #[test]
    fn what_has_gone_is_named_as_it_was() {
        let mut s = symbolizer();
        let in_module = 0xffffffffc0400000 + 0x80 + 67;
        let in_program = 0xffffffffc0600000 + 0x20;
        let after_kallsyms: String = KALLSYMS
            .lines()
            .filter(|l| !l.contains("[rcutrace_test]") && !l.contains("count_calls"))
            .chain(["ffffffffc0700000 t newcomer\t[virtio_net]"])
            .map(|l| format!("{l}\n"))
            .collect();
        let after_modules = "virtio_net 65536 0 - Live 0xffffffffc0700000\n";
        let after_extents = Extents {
            modules: table::parse_modules(after_modules),
            ..extents()
        };
        let before = Presence::of(MODULES, [7]);
        let after = Presence::of(after_modules, [8]);
        assert!(after.has_new(&before));
        assert!(!Presence::of("", [7]).has_new(&before), "only departures");
        s.replace(Table::parse(&after_kallsyms, &after_extents), after);
        assert_eq!(
            s.frame(in_module),
            "rcutrace_test_hurry_cb+67 [rcutrace_test]"
        );
        assert_eq!(
            s.frame(in_program),
            "bpf_prog_6deef7357e7b4530_count_calls+32 [bpf]"
        );
        assert_eq!(s.frame(0xffffffffc0700004), "newcomer+4 [virtio_net]");
        // Never the trampoline below the gone module.
        assert_eq!(s.frame(0xffffffffc0202053), "0xffffffffc0202053");
        assert_eq!(s.frame(0xffffffffc0404000), "0xffffffffc0404000");
    }
}
