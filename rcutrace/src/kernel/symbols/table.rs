//! One snapshot of the kernel's symbols, each with its extent: the addresses it may name.
//!
//! kallsyms gives no sizes, so a symbol ends at the next symbol and never past the end of
//! what holds it: the kernel's own symbols at its last one, a module's at the end of the
//! module's memory (/proc/modules), a BPF program's function at its jited length (which only
//! the BPF syscalls tell), a trampoline or kprobe slot within a page of its start (the kernel
//! allocates none larger). An address no extent covers is unknown: without the bounds, an
//! address in an unloaded module would be named after whatever symbol lies below it
//! (`ftrace_trampoline+8275`).

use std::collections::HashMap;

/// What holds a symbol.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    /// The kernel image.
    Kernel,
    /// A loaded module, by name.
    Module(String),
    /// Code the kernel generated: BPF programs and trampolines (`bpf`), ftrace trampolines
    /// (`__builtin__ftrace`), kprobe slots (`__builtin__kprobes`), as kallsyms names them.
    Generated(String),
}

impl Owner {
    /// As kallsyms' last column shows it (none for the kernel's own).
    pub fn bracketed(&self) -> Option<&str> {
        match self {
            Owner::Kernel => None,
            Owner::Module(name) | Owner::Generated(name) => Some(name),
        }
    }
}

/// A symbol and the addresses `[start, end)` it names, kept on its own (one that has gone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub start: u64,
    pub end: u64,
    pub name: String,
    pub owner: Owner,
}

impl Symbol {
    pub fn as_ref(&self) -> SymbolRef<'_> {
        SymbolRef {
            start: self.start,
            end: self.end,
            name: &self.name,
            owner: &self.owner,
        }
    }
}

/// A symbol of a table, as the table holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolRef<'a> {
    pub start: u64,
    pub end: u64,
    pub name: &'a str,
    pub owner: &'a Owner,
}

impl SymbolRef<'_> {
    pub fn to_symbol(self) -> Symbol {
        Symbol {
            start: self.start,
            end: self.end,
            name: self.name.to_string(),
            owner: self.owner.clone(),
        }
    }
}

/// A loaded module's memory, `[start, end)`, from /proc/modules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleRange {
    pub name: String,
    pub start: u64,
    pub end: u64,
}

/// What kallsyms does not say, gathered beside it.
#[derive(Clone, Debug, Default)]
pub struct Extents {
    pub modules: Vec<ModuleRange>,
    /// Jited BPF functions: start address to length in bytes.
    pub bpf_functions: HashMap<u64, u64>,
    pub page_size: u64,
}

/// Which of kallsyms' symbols a table keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Every symbol (tests: one table of a whole text).
    #[cfg_attr(not(test), allow(dead_code))]
    All,
    /// The kernel image's own, which never change while it runs.
    Kernel,
    /// Those of modules and generated code: the ones that come and go.
    Transient,
}

/// Symbols sorted by address, with extents that never overlap. Held compactly (a few hundred
/// thousand of them on a distribution kernel): the names in one string, each entry 24 bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    entries: Vec<Entry>,
    names: String,
    /// Owners by index; the kernel's is 0.
    owners: Vec<Owner>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    start: u64,
    end: u64,
    name_at: u32,
    name_len: u16,
    owner: u16,
}

/// One kallsyms line's fields.
struct Line<'a> {
    start: u64,
    name: &'a str,
    /// The bracketed last column, if any.
    owner: Option<&'a str>,
}

impl Table {
    /// The symbols of a /proc/kallsyms text (lines `ADDRESS TYPE NAME [OWNER]`), bounded by
    /// `extents`. Addresses kptr_restrict zeroed are left out.
    #[cfg(test)]
    pub fn parse(kallsyms: &str, extents: &Extents) -> Table {
        Table::read(kallsyms.as_bytes(), extents, Which::All).expect("reading a string")
    }

    /// Reads kallsyms' lines from `kallsyms` one at a time, keeping `which` of them, bounded
    /// by `extents`: the text itself is never held whole.
    pub fn read(
        mut kallsyms: impl std::io::BufRead,
        extents: &Extents,
        which: Which,
    ) -> std::io::Result<Table> {
        let mut table = Table {
            owners: vec![Owner::Kernel],
            ..Table::default()
        };
        let mut owners: HashMap<String, u16> = HashMap::new();
        let mut line = String::new();
        loop {
            line.clear();
            if kallsyms.read_line(&mut line)? == 0 {
                break;
            }
            let transient = line.contains('[');
            let wanted = match which {
                Which::All => true,
                Which::Kernel => !transient,
                Which::Transient => transient,
            };
            if !wanted {
                continue;
            }
            let Some(fields) = parse_line(&line) else {
                continue;
            };
            let owner = match fields.owner {
                None => 0,
                Some(name) => match owners.get(name) {
                    Some(&index) => index,
                    None => {
                        let Ok(index) = u16::try_from(table.owners.len()) else {
                            continue;
                        };
                        table.owners.push(owner_named(name));
                        owners.insert(name.to_string(), index);
                        index
                    }
                },
            };
            let (Ok(name_at), Ok(name_len)) = (
                u32::try_from(table.names.len()),
                u16::try_from(fields.name.len()),
            ) else {
                continue;
            };
            table.names.push_str(fields.name);
            table.entries.push(Entry {
                start: fields.start,
                end: fields.start,
                name_at,
                name_len,
                owner,
            });
        }
        table.bound(extents);
        Ok(table)
    }

    /// Sorts the entries and gives each its extent.
    fn bound(&mut self, extents: &Extents) {
        // Several names at one address: the first listed names it.
        self.entries.sort_by_key(|e| e.start);
        self.entries.dedup_by_key(|e| e.start);
        self.entries.shrink_to_fit();
        self.names.shrink_to_fit();
        let kernel_end = self
            .entries
            .iter()
            .filter(|e| e.owner == 0)
            .map(|e| e.start)
            .max()
            .unwrap_or(0);
        for i in 0..self.entries.len() {
            let next = self.entries.get(i + 1).map(|e| e.start);
            let bound = holder_end(self.symbol(self.entries[i]), kernel_end, extents);
            let entry = &mut self.entries[i];
            entry.end = match next {
                Some(next) => bound.min(next),
                None => bound,
            }
            .max(entry.start);
        }
    }

    fn symbol(&self, entry: Entry) -> SymbolRef<'_> {
        let at = entry.name_at as usize;
        SymbolRef {
            start: entry.start,
            end: entry.end,
            name: &self.names[at..at + entry.name_len as usize],
            owner: &self.owners[entry.owner as usize],
        }
    }

    /// The symbol whose extent holds `addr`.
    pub fn lookup(&self, addr: u64) -> Option<SymbolRef<'_>> {
        let after = self.entries.partition_point(|e| e.start <= addr);
        let entry = *self.entries.get(after.checked_sub(1)?)?;
        (addr < entry.end).then(|| self.symbol(entry))
    }

    /// Whether this table has `symbol`, at the same address, under the same owner.
    pub fn has(&self, symbol: SymbolRef<'_>) -> bool {
        let at = self.entries.partition_point(|e| e.start < symbol.start);
        self.entries.get(at).is_some_and(|&e| {
            let s = self.symbol(e);
            s.start == symbol.start && s.name == symbol.name && s.owner == symbol.owner
        })
    }

    /// The symbols of modules and generated code: the ones that can go away.
    pub fn transient(&self) -> impl Iterator<Item = SymbolRef<'_>> {
        self.entries
            .iter()
            .filter(|e| e.owner != 0)
            .map(|&e| self.symbol(e))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Where what holds `symbol` ends, whatever the next symbol.
fn holder_end(symbol: SymbolRef<'_>, kernel_end: u64, extents: &Extents) -> u64 {
    match symbol.owner {
        // The last of the kernel's own symbols marks its end, and names nothing past it.
        Owner::Kernel => kernel_end,
        Owner::Module(name) => extents
            .modules
            .iter()
            .find(|m| &m.name == name && (m.start..m.end).contains(&symbol.start))
            // A module /proc/modules did not list (it came or went between the two reads):
            // nothing bounds it, so it names only its own address.
            .map_or(symbol.start + 1, |m| m.end),
        Owner::Generated(_) if symbol.name.starts_with("bpf_prog_") => extents
            .bpf_functions
            .get(&symbol.start)
            // Unmeasured (loaded after the lengths were asked): its own address only.
            .map_or(symbol.start + 1, |len| symbol.start + len),
        // BPF trampolines and dispatchers, ftrace trampolines and kprobe slots: one page at
        // most.
        Owner::Generated(_) => symbol.start.saturating_add(extents.page_size),
    }
}

fn parse_line(line: &str) -> Option<Line<'_>> {
    let mut fields = line.split_whitespace();
    let start = u64::from_str_radix(fields.next()?, 16).ok()?;
    let kind = fields.next()?;
    // Absolute symbols are values, not places: 6.1's and 6.12's per-CPU variables are listed
    // so, at offsets from zero, where the last one would otherwise name every address up to
    // the kernel's text (a heap address as `__per_cpu_end+18388334901142823424`).
    if kind.eq_ignore_ascii_case("a") {
        return None;
    }
    let name = fields.next()?;
    let owner = match fields.next() {
        None => None,
        Some(owner) => Some(owner.strip_prefix('[')?.strip_suffix(']')?),
    };
    (start != 0).then_some(Line { start, name, owner })
}

/// What holds symbols listed with `[name]`.
fn owner_named(name: &str) -> Owner {
    if name == "bpf" || name.starts_with("__builtin__") {
        Owner::Generated(name.to_string())
    } else {
        Owner::Module(name.to_string())
    }
}

pub fn parse_modules(text: &str) -> Vec<ModuleRange> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let name = fields.first()?;
            let size: u64 = fields.get(1)?.parse().ok()?;
            let start = u64::from_str_radix(fields.get(5)?.trim_start_matches("0x"), 16).ok()?;
            // Without root the kernel shows every address as zero.
            (start != 0).then(|| ModuleRange {
                name: name.to_string(),
                start,
                end: start + size,
            })
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub const KALLSYMS: &str = "\
0000000000000000 A fixed_percpu_data
0000000000034000 A __per_cpu_end
ffffffff81000000 T _stext
ffffffff81100000 T call_rcu
ffffffff81100000 T call_rcu_alias
ffffffff81100040 t rcu_work_rcufn
ffffffff81100100 T kvfree_call_rcu
ffffffff81200000 T _etext
ffffffff82000000 B _end
ffffffffc0200000 t ftrace_trampoline\t[__builtin__ftrace]
ffffffffc0400000 t rcutrace_test_cb\t[rcutrace_test]
ffffffffc0400080 t rcutrace_test_hurry_cb\t[rcutrace_test]
ffffffffc0600000 t bpf_prog_6deef7357e7b4530_count_calls\t[bpf]
ffffffffc0600100 t bpf_prog_00000000000000aa_unmeasured\t[bpf]
ffffffffc0601000 t bpf_trampoline_6442525537\t[bpf]
";
    pub const MODULES: &str = "\
rcutrace_test 16384 0 - Live 0xffffffffc0400000 (OE)
virtio_net 65536 0 - Live 0xffffffffc0500000
hidden 4096 0 - Live 0x0000000000000000
";

    pub fn extents() -> Extents {
        Extents {
            modules: parse_modules(MODULES),
            bpf_functions: HashMap::from([(0xffffffffc0600000, 0x80)]),
            page_size: 4096,
        }
    }

    fn name(table: &Table, addr: u64) -> Option<(&str, u64)> {
        table.lookup(addr).map(|s| (s.name, addr - s.start))
    }

    #[test]
    fn symbols_name_their_own_extent() {
        let table = Table::parse(KALLSYMS, &extents());
        assert_eq!(name(&table, 0xffffffff81100005), Some(("call_rcu", 5)));
        assert_eq!(
            name(&table, 0xffffffff81100150),
            Some(("kvfree_call_rcu", 0x50))
        );
        assert_eq!(
            name(&table, 0xffffffffc0400090),
            Some(("rcutrace_test_hurry_cb", 0x10))
        );
        assert_eq!(
            name(&table, 0xffffffffc0600010),
            Some(("bpf_prog_6deef7357e7b4530_count_calls", 0x10))
        );
        assert_eq!(
            name(&table, 0xffffffffc0601fff),
            Some(("bpf_trampoline_6442525537", 0xfff))
        );
        // kptr_restrict's zeros name nothing, nor do absolute symbols (per-CPU offsets): a
        // heap address is no one's.
        assert_eq!(name(&table, 0x10), None);
        assert_eq!(name(&table, 0x34010), None);
        assert_eq!(name(&table, 0xffff888004a1c000), None);
    }

    #[test]
    fn nothing_is_named_past_its_holders_end() {
        let table = Table::parse(KALLSYMS, &extents());
        // Past the kernel's last symbol: not `_end+...`.
        assert_eq!(name(&table, 0xffffffff82000010), None);
        // Past the ftrace trampoline's page, in memory a module had: not
        // `ftrace_trampoline+8275`.
        assert_eq!(name(&table, 0xffffffffc0202053), None);
        // Past the module's memory (16 KiB): not `rcutrace_test_hurry_cb+...`.
        assert_eq!(name(&table, 0xffffffffc0404000), None);
        assert!(table.lookup(0xffffffffc0403fff).is_some());
        // Past a BPF program's jited length, and in a program of unknown length.
        assert_eq!(name(&table, 0xffffffffc0600080), None);
        assert_eq!(name(&table, 0xffffffffc0600104), None);
        // Past a BPF trampoline's page.
        assert_eq!(name(&table, 0xffffffffc0602000), None);
    }

    #[test]
    fn a_module_missing_from_proc_modules_names_only_its_addresses() {
        let table = Table::parse(KALLSYMS, &Extents::default());
        assert_eq!(
            name(&table, 0xffffffffc0400000),
            Some(("rcutrace_test_cb", 0))
        );
        assert_eq!(name(&table, 0xffffffffc0400001), None);
    }

    #[test]
    fn aliases_and_owners() {
        let table = Table::parse(KALLSYMS, &extents());
        assert_eq!(name(&table, 0xffffffff81100000), Some(("call_rcu", 0)));
        let cb = table.lookup(0xffffffffc0400000).unwrap();
        assert_eq!(cb.owner.bracketed(), Some("rcutrace_test"));
        assert_eq!(
            table.lookup(0xffffffff81100000).unwrap().owner.bracketed(),
            None
        );
        assert!(table.has(cb));
        assert!(!table.has(SymbolRef {
            name: "other",
            ..cb
        }));
        assert_eq!(table.transient().count(), 6);
    }

    #[test]
    fn modules_without_addresses_are_ignored() {
        let modules = parse_modules(MODULES);
        assert_eq!(modules.len(), 2);
        assert_eq!(modules[0].end, 0xffffffffc0400000 + 16384);
    }
}
