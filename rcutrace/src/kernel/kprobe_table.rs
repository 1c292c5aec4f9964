//! The kprobe layer's own count of the hits it skipped, for each kprobe rcutrace attached,
//! read from kernel memory (/proc/kcore). A kprobe hit while another kprobe's handler runs on
//! that CPU (`kprobe_running()`, e.g. a softirq that invokes callbacks, come in the middle of
//! a handler) never reaches the BPF program: the kprobe layer only adds one to the probe's
//! `nmissed` (`kprobes_inc_nmissed_count()`, the same on 6.1, 6.12 and 7.3, whether the
//! probe is reached through ftrace, a breakpoint or an optimized jump). The BPF program's
//! `recursion_misses` never hears of it.
//!
//! Registered kprobes hang in `kprobe_table[]`, 64 hash lists by address. Where several
//! probes share an address the list holds one aggregate kprobe (`pre_handler` is
//! `aggr_pre_handler`) whose `list` holds the real ones, and a skipped hit adds one to the
//! `nmissed` of each of them: so each probe's own `nmissed` counts exactly its skips while it
//! was registered, whoever else probes the same function. aya creates its kprobes through
//! perf's kprobe PMU: each is the `struct kprobe` inside a `trace_kprobe` of its own
//! (`rp.kp`; a return probe's `rp` is its `kretprobe`), named by `symbol`, whose event's
//! `prog_array` lists the BPF programs attached to it. rcutrace's probe is the one of its
//! function and side that runs rcutrace's program: a probe of another tool on the same
//! function runs another program.
//!
//! Nothing here is written, and nothing is asked of a kprobe link (that query crashed a 6.12
//! kernel). The walk runs while other tools may register and unregister probes: every list
//! walk is bounded and every pointer checked, and a probe that cannot be read is not ours to
//! count (ours stay registered while rcutrace reads them).

use std::collections::HashMap;

use anyhow::{Context as _, Result};

use super::{btf, kcore::KernelMemory};

/// `KPROBE_TABLE_SIZE`, `1 << KPROBE_HASH_BITS` (6 on every kernel since 2.6).
const TABLE_BUCKETS: u64 = 64;
/// More probes than any hash list or aggregate holds in practice.
const MAX_CHAIN: usize = 4096;
/// More programs than one kprobe event runs (`BPF_TRACE_MAX_PROGS` is 64).
const MAX_PROGRAMS: u64 = 64;
/// `struct bpf_prog_array_item`: the program's pointer and a 16-byte union (6.1 to 7.3).
const PROG_ARRAY_ITEM_SIZE: u64 = 24;
/// Longer than any kernel function's name.
const MAX_SYMBOL: usize = 256;

const KPROBE_HLIST: btf::Field = ("kprobe", "hlist");
const KPROBE_LIST: btf::Field = ("kprobe", "list");
const KPROBE_NMISSED: btf::Field = ("kprobe", "nmissed");
const KPROBE_PRE_HANDLER: btf::Field = ("kprobe", "pre_handler");
const KRETPROBE_KP: btf::Field = ("kretprobe", "kp");
const KRETPROBE_HANDLER: btf::Field = ("kretprobe", "handler");
const KRETPROBE_NMISSED: btf::Field = ("kretprobe", "nmissed");
const TRACE_KPROBE_RP: btf::Field = ("trace_kprobe", "rp");
const TRACE_KPROBE_SYMBOL: btf::Field = ("trace_kprobe", "symbol");
const TRACE_KPROBE_TP: btf::Field = ("trace_kprobe", "tp");
const TRACE_PROBE_EVENT: btf::Field = ("trace_probe", "event");
const PROBE_EVENT_CALL: btf::Field = ("trace_probe_event", "call");
const EVENT_CALL_PROG_ARRAY: btf::Field = ("trace_event_call", "prog_array");
const PROG_ARRAY_ITEMS: btf::Field = ("bpf_prog_array", "items");
const PROG_AUX: btf::Field = ("bpf_prog", "aux");
const PROG_AUX_ID: btf::Field = ("bpf_prog_aux", "id");

/// The fields read, for the run's one pass over the BTF.
pub const FIELDS: [btf::Field; 16] = [
    KPROBE_HLIST,
    KPROBE_LIST,
    KPROBE_NMISSED,
    KPROBE_PRE_HANDLER,
    KRETPROBE_KP,
    KRETPROBE_HANDLER,
    KRETPROBE_NMISSED,
    TRACE_KPROBE_RP,
    TRACE_KPROBE_SYMBOL,
    TRACE_KPROBE_TP,
    TRACE_PROBE_EVENT,
    PROBE_EVENT_CALL,
    EVENT_CALL_PROG_ARRAY,
    PROG_ARRAY_ITEMS,
    PROG_AUX,
    PROG_AUX_ID,
];

/// The symbols the walk needs: the table, and the handlers that tell an aggregate, a
/// trace_kprobe's entry probe and its return probe apart.
pub const SYMBOLS: [&str; 5] = [
    "kprobe_table",
    "aggr_pre_handler",
    "kprobe_dispatcher",
    "pre_handler_kretprobe",
    "kretprobe_dispatcher",
];

/// Where things are in this kernel: byte offsets of the fields read, and addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub kprobe_hlist: u64,
    pub kprobe_list: u64,
    pub kprobe_nmissed: u64,
    pub kprobe_pre_handler: u64,
    /// Of the kprobe inside its `kretprobe`.
    pub kretprobe_kp: u64,
    pub kretprobe_handler: u64,
    pub kretprobe_nmissed: u64,
    pub trace_kprobe_rp: u64,
    pub trace_kprobe_symbol: u64,
    /// `trace_kprobe.tp.event`.
    pub trace_kprobe_event: u64,
    /// `trace_probe_event.call.prog_array`.
    pub event_prog_array: u64,
    pub prog_array_items: u64,
    pub prog_aux: u64,
    pub prog_aux_id: u64,
    pub table: u64,
    pub aggr_pre_handler: u64,
    pub kprobe_dispatcher: u64,
    pub pre_handler_kretprobe: u64,
    pub kretprobe_dispatcher: u64,
}

/// One of rcutrace's kprobes: its function, whether it is a return probe, and the id of the
/// program attached to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ours<'a> {
    pub function: &'a str,
    pub is_return: bool,
    pub program_id: u32,
}

/// What the kernel counted for one of rcutrace's kprobes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    /// The `struct kprobe`'s address: a probe registered again (detached and attached, as
    /// `--sample-readers` does) is a new one, whose count starts again from zero.
    pub address: u64,
    /// Hits the kprobe layer skipped.
    pub nmissed: u64,
    /// A return probe's calls whose return could not be watched (no free instance:
    /// `maxactive`); the programs see those as returns lost.
    pub returns_dropped: u64,
}

/// Words of kernel memory: /proc/kcore, or an image in the tests.
pub trait Memory {
    fn read_u64(&self, address: u64) -> Result<u64>;
    fn read_u32(&self, address: u64) -> Result<u32>;
    fn read_u8(&self, address: u64) -> Result<u8>;
}

impl Memory for KernelMemory {
    fn read_u64(&self, address: u64) -> Result<u64> {
        KernelMemory::read_u64(self, address)
    }
    fn read_u32(&self, address: u64) -> Result<u32> {
        KernelMemory::read_u32(self, address)
    }
    fn read_u8(&self, address: u64) -> Result<u8> {
        KernelMemory::read_u8(self, address)
    }
}

/// This kernel's kprobe table, ready to be read.
pub struct KprobeTable {
    memory: KernelMemory,
    layout: Layout,
    /// Where the last walk found each of rcutrace's kprobes: read there again, until one
    /// is registered anew (`forget`), rather than walking the whole table for each report.
    found_at: std::sync::Mutex<Option<Vec<(Key, u64)>>>,
}

/// One of rcutrace's kprobes, owning its function's name.
type Key = (String, bool, u32);

fn key(ours: &Ours<'_>) -> Key {
    (ours.function.to_string(), ours.is_return, ours.program_id)
}

impl KprobeTable {
    /// Finds the table and the layout (`symbols`: the start's symbol lookup, which looked for
    /// `SYMBOLS`); fails saying what this kernel does not give.
    pub fn locate(symbols: &HashMap<String, u64>) -> Result<KprobeTable> {
        let offsets = btf::field_offsets(&FIELDS)
            .context("reading the kprobes' layout from the kernel BTF")?;
        let offset = |field: btf::Field| {
            offsets
                .get(&field)
                .map(|&o| u64::from(o))
                .with_context(|| format!("this kernel's BTF has no {}.{}", field.0, field.1))
        };
        let symbol = |name: &str| {
            symbols.get(name).copied().with_context(|| {
                format!(
                    "kallsyms gives no address for {name} (kernel.kptr_restrict, or a \
                     kernel without CONFIG_KALLSYMS_ALL)"
                )
            })
        };
        let layout = Layout {
            kprobe_hlist: offset(KPROBE_HLIST)?,
            kprobe_list: offset(KPROBE_LIST)?,
            kprobe_nmissed: offset(KPROBE_NMISSED)?,
            kprobe_pre_handler: offset(KPROBE_PRE_HANDLER)?,
            kretprobe_kp: offset(KRETPROBE_KP)?,
            kretprobe_handler: offset(KRETPROBE_HANDLER)?,
            kretprobe_nmissed: offset(KRETPROBE_NMISSED)?,
            trace_kprobe_rp: offset(TRACE_KPROBE_RP)?,
            trace_kprobe_symbol: offset(TRACE_KPROBE_SYMBOL)?,
            trace_kprobe_event: offset(TRACE_KPROBE_TP)? + offset(TRACE_PROBE_EVENT)?,
            event_prog_array: offset(PROBE_EVENT_CALL)? + offset(EVENT_CALL_PROG_ARRAY)?,
            prog_array_items: offset(PROG_ARRAY_ITEMS)?,
            prog_aux: offset(PROG_AUX)?,
            prog_aux_id: offset(PROG_AUX_ID)?,
            table: symbol("kprobe_table")?,
            aggr_pre_handler: symbol("aggr_pre_handler")?,
            kprobe_dispatcher: symbol("kprobe_dispatcher")?,
            pre_handler_kretprobe: symbol("pre_handler_kretprobe")?,
            kretprobe_dispatcher: symbol("kretprobe_dispatcher")?,
        };
        let memory = KernelMemory::open().context("reading the kprobe table")?;
        Ok(KprobeTable {
            memory,
            layout,
            found_at: std::sync::Mutex::new(None),
        })
    }

    /// What the kernel counted for each of `ours` now; one it could not find is absent.
    /// The table is walked when `ours` differ from the last walk's, or one was registered
    /// anew since; otherwise each is read where that walk found it.
    pub fn read<'a>(&self, ours: &[Ours<'a>]) -> Result<HashMap<Ours<'a>, Counted>> {
        let mut found_at = self.found_at.lock().unwrap_or_else(|e| e.into_inner());
        read_where_found(&self.memory, &self.layout, &mut found_at, ours)
    }

    /// One of rcutrace's kprobes was registered anew (detached and attached again): the next
    /// reading walks the table.
    pub fn forget(&self) {
        *self.found_at.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Walks every hash list of the table, and every aggregate's list, for `ours`.
pub fn walk<'a>(
    memory: &impl Memory,
    layout: &Layout,
    ours: &[Ours<'a>],
) -> Result<HashMap<Ours<'a>, Counted>> {
    let mut found = HashMap::new();
    for bucket in 0..TABLE_BUCKETS {
        // hlist_head.first, then each hlist_node.next: the first word of each.
        let mut node = memory.read_u64(layout.table + 8 * bucket)?;
        for _ in 0..MAX_CHAIN {
            if !is_kernel_pointer(node) {
                break;
            }
            let kprobe = node - layout.kprobe_hlist;
            for member in members(memory, layout, kprobe) {
                if let Some((probe, counted)) = our_probe(memory, layout, member, ours) {
                    found.insert(probe, counted);
                }
            }
            node = memory.read_u64(node).unwrap_or(0);
        }
    }
    Ok(found)
}

/// The real probes behind a kprobe of the table: an aggregate's list, or the probe itself.
fn members(memory: &impl Memory, layout: &Layout, kprobe: u64) -> Vec<u64> {
    let pre_handler = memory.read_u64(kprobe + layout.kprobe_pre_handler);
    if pre_handler.ok() != Some(layout.aggr_pre_handler) {
        return vec![kprobe];
    }
    let head = kprobe + layout.kprobe_list;
    let mut members = Vec::new();
    let mut next = memory.read_u64(head).unwrap_or(0);
    while next != head && is_kernel_pointer(next) && members.len() < MAX_CHAIN {
        members.push(next - layout.kprobe_list);
        next = memory.read_u64(next).unwrap_or(0);
    }
    members
}

/// `kprobe` if it is one of `ours`, with what the kernel counted for it.
fn our_probe<'a>(
    memory: &impl Memory,
    layout: &Layout,
    kprobe: u64,
    ours: &[Ours<'a>],
) -> Option<(Ours<'a>, Counted)> {
    let pre_handler = memory.read_u64(kprobe + layout.kprobe_pre_handler).ok()?;
    let kretprobe = kprobe.checked_sub(layout.kretprobe_kp)?;
    let is_return = if pre_handler == layout.kprobe_dispatcher {
        false
    } else if pre_handler == layout.pre_handler_kretprobe
        && memory.read_u64(kretprobe + layout.kretprobe_handler).ok()?
            == layout.kretprobe_dispatcher
    {
        true
    } else {
        // Not a trace_kprobe's: a module's own kprobe, say.
        return None;
    };
    let trace_kprobe = kretprobe.checked_sub(layout.trace_kprobe_rp)?;
    let symbol = read_string(
        memory,
        memory
            .read_u64(trace_kprobe + layout.trace_kprobe_symbol)
            .ok()?,
    )?;
    let candidates: Vec<&Ours<'a>> = ours
        .iter()
        .filter(|o| o.is_return == is_return && o.function == symbol)
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let programs = program_ids(memory, layout, trace_kprobe)?;
    let probe = candidates
        .into_iter()
        .find(|o| programs.contains(&o.program_id))?;
    Some((*probe, counted_at(memory, layout, kprobe, is_return)?))
}

/// `KprobeTable::read`, with where the last walk found each kprobe (`found_at`).
fn read_where_found<'a>(
    memory: &impl Memory,
    layout: &Layout,
    found_at: &mut Option<Vec<(Key, u64)>>,
    ours: &[Ours<'a>],
) -> Result<HashMap<Ours<'a>, Counted>> {
    if let Some(places) = found_at.as_ref()
        && places.len() == ours.len()
        && let Some(counted) = ours
            .iter()
            .map(|o| {
                let key = key(o);
                let (_, kprobe) = places.iter().find(|(k, _)| *k == key)?;
                Some((*o, counted_at(memory, layout, *kprobe, o.is_return)?))
            })
            .collect::<Option<HashMap<_, _>>>()
    {
        return Ok(counted);
    }
    let counted = walk(memory, layout, ours)?;
    *found_at = (counted.len() == ours.len())
        .then(|| counted.iter().map(|(o, c)| (key(o), c.address)).collect());
    Ok(counted)
}

/// What the kernel counted for the kprobe at `kprobe`, a known one of rcutrace's.
fn counted_at(
    memory: &impl Memory,
    layout: &Layout,
    kprobe: u64,
    is_return: bool,
) -> Option<Counted> {
    let returns_dropped = if is_return {
        let kretprobe = kprobe.checked_sub(layout.kretprobe_kp)?;
        // An int; negative would be a kernel bug, not calls.
        (memory.read_u32(kretprobe + layout.kretprobe_nmissed).ok()? as i32).max(0) as u64
    } else {
        0
    };
    Some(Counted {
        address: kprobe,
        nmissed: memory.read_u64(kprobe + layout.kprobe_nmissed).ok()?,
        returns_dropped,
    })
}

/// The ids of the BPF programs a trace_kprobe's event runs.
fn program_ids(memory: &impl Memory, layout: &Layout, trace_kprobe: u64) -> Option<Vec<u32>> {
    let event = memory
        .read_u64(trace_kprobe + layout.trace_kprobe_event)
        .ok()?;
    if !is_kernel_pointer(event) {
        return None;
    }
    let array = memory.read_u64(event + layout.event_prog_array).ok()?;
    if !is_kernel_pointer(array) {
        return Some(Vec::new());
    }
    let items = array + layout.prog_array_items;
    let mut ids = Vec::new();
    for i in 0..MAX_PROGRAMS {
        let program = memory.read_u64(items + i * PROG_ARRAY_ITEM_SIZE).ok()?;
        if !is_kernel_pointer(program) {
            break;
        }
        let aux = memory.read_u64(program + layout.prog_aux).ok()?;
        if is_kernel_pointer(aux) {
            ids.push(memory.read_u32(aux + layout.prog_aux_id).ok()?);
        }
    }
    Some(ids)
}

/// The NUL-terminated string at `address`.
fn read_string(memory: &impl Memory, address: u64) -> Option<String> {
    if !is_kernel_pointer(address) {
        return None;
    }
    let mut bytes = Vec::new();
    for i in 0..MAX_SYMBOL as u64 {
        match memory.read_u8(address + i).ok()? {
            0 => return String::from_utf8(bytes).ok(),
            byte => bytes.push(byte),
        }
    }
    None
}

/// Kernel addresses are in the upper half (x86-64 and arm64 alike); zero ends a list.
fn is_kernel_pointer(address: u64) -> bool {
    address >= 1 << 63
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Kernel memory as a map of addresses to bytes; anything else is unmapped.
    #[derive(Default)]
    struct Image(BTreeMap<u64, u8>);

    impl Image {
        fn put_u64(&mut self, address: u64, value: u64) {
            for (i, byte) in value.to_ne_bytes().into_iter().enumerate() {
                self.0.insert(address + i as u64, byte);
            }
        }
        fn put_u32(&mut self, address: u64, value: u32) {
            for (i, byte) in value.to_ne_bytes().into_iter().enumerate() {
                self.0.insert(address + i as u64, byte);
            }
        }
        fn put_str(&mut self, address: u64, text: &str) {
            for (i, byte) in text.bytes().chain([0]).enumerate() {
                self.0.insert(address + i as u64, byte);
            }
        }
        fn bytes<const N: usize>(&self, address: u64) -> Result<[u8; N]> {
            let mut bytes = [0u8; N];
            for (i, byte) in bytes.iter_mut().enumerate() {
                *byte = *self
                    .0
                    .get(&(address + i as u64))
                    .with_context(|| format!("{address:#x} not mapped"))?;
            }
            Ok(bytes)
        }
    }

    impl Memory for Image {
        fn read_u64(&self, address: u64) -> Result<u64> {
            Ok(u64::from_ne_bytes(self.bytes(address)?))
        }
        fn read_u32(&self, address: u64) -> Result<u32> {
            Ok(u32::from_ne_bytes(self.bytes(address)?))
        }
        fn read_u8(&self, address: u64) -> Result<u8> {
            Ok(self.bytes::<1>(address)?[0])
        }
    }

    /// 6.12's offsets (from its BTF), and made-up addresses.
    const LAYOUT: Layout = Layout {
        kprobe_hlist: 0,
        kprobe_list: 16,
        kprobe_nmissed: 32,
        kprobe_pre_handler: 64,
        kretprobe_kp: 0,
        kretprobe_handler: 128,
        kretprobe_nmissed: 148,
        trace_kprobe_rp: 24,
        trace_kprobe_symbol: 200,
        trace_kprobe_event: 208 + 16,
        event_prog_array: 80 + 104,
        prog_array_items: 16,
        prog_aux: 56,
        prog_aux_id: 20,
        table: 0xffff_ffff_8300_0000,
        aggr_pre_handler: 0xffff_ffff_8110_0000,
        kprobe_dispatcher: 0xffff_ffff_8120_0000,
        pre_handler_kretprobe: 0xffff_ffff_8130_0000,
        kretprobe_dispatcher: 0xffff_ffff_8140_0000,
    };

    /// Makes a trace_kprobe at `at` on `function` running programs `ids`; returns the address
    /// of its `struct kprobe`.
    fn trace_kprobe(
        image: &mut Image,
        at: u64,
        function: &str,
        is_return: bool,
        ids: &[u32],
        nmissed: u64,
        dropped: u32,
    ) -> u64 {
        let kretprobe = at + LAYOUT.trace_kprobe_rp;
        let kprobe = kretprobe + LAYOUT.kretprobe_kp;
        let handler = if is_return {
            LAYOUT.pre_handler_kretprobe
        } else {
            LAYOUT.kprobe_dispatcher
        };
        image.put_u64(kprobe + LAYOUT.kprobe_pre_handler, handler);
        image.put_u64(kprobe + LAYOUT.kprobe_nmissed, nmissed);
        image.put_u64(kprobe + LAYOUT.kprobe_hlist, 0);
        let dispatcher = if is_return {
            LAYOUT.kretprobe_dispatcher
        } else {
            0
        };
        image.put_u64(kretprobe + LAYOUT.kretprobe_handler, dispatcher);
        image.put_u32(kretprobe + LAYOUT.kretprobe_nmissed, dropped);
        let symbol = at + 0x1000;
        image.put_str(symbol, function);
        image.put_u64(at + LAYOUT.trace_kprobe_symbol, symbol);
        let event = at + 0x2000;
        image.put_u64(at + LAYOUT.trace_kprobe_event, event);
        let array = at + 0x3000;
        image.put_u64(event + LAYOUT.event_prog_array, array);
        for (i, id) in ids.iter().enumerate() {
            let program = at + 0x4000 + 0x100 * i as u64;
            let aux = program + 0x80;
            image.put_u64(
                array + LAYOUT.prog_array_items + PROG_ARRAY_ITEM_SIZE * i as u64,
                program,
            );
            image.put_u64(program + LAYOUT.prog_aux, aux);
            image.put_u32(aux + LAYOUT.prog_aux_id, *id);
        }
        image.put_u64(
            array + LAYOUT.prog_array_items + PROG_ARRAY_ITEM_SIZE * ids.len() as u64,
            0,
        );
        kprobe
    }

    fn empty_table() -> Image {
        let mut image = Image::default();
        for bucket in 0..TABLE_BUCKETS {
            image.put_u64(LAYOUT.table + 8 * bucket, 0);
        }
        image
    }

    /// Links `kprobes` into one hash list, in this order.
    fn chain(image: &mut Image, bucket: u64, kprobes: &[u64]) {
        let mut link = LAYOUT.table + 8 * bucket;
        for kprobe in kprobes {
            image.put_u64(link, kprobe + LAYOUT.kprobe_hlist);
            link = kprobe + LAYOUT.kprobe_hlist;
        }
        image.put_u64(link, 0);
    }

    /// An aggregate at `at` whose list holds `members`.
    fn aggregate(image: &mut Image, at: u64, members: &[u64]) -> u64 {
        image.put_u64(at + LAYOUT.kprobe_pre_handler, LAYOUT.aggr_pre_handler);
        // The aggregate counts too, but is nobody's probe.
        image.put_u64(at + LAYOUT.kprobe_nmissed, 999);
        let head = at + LAYOUT.kprobe_list;
        let mut link = head;
        for member in members {
            image.put_u64(link, member + LAYOUT.kprobe_list);
            link = member + LAYOUT.kprobe_list;
        }
        image.put_u64(link, head);
        at
    }

    const OUR_ENTRY: Ours<'static> = Ours {
        function: "rcu_segcblist_enqueue",
        is_return: false,
        program_id: 41,
    };
    const OUR_RETURN: Ours<'static> = Ours {
        function: "rcu_cblist_dequeue",
        is_return: true,
        program_id: 42,
    };

    /// Each of rcutrace's probes is found by its function, side and program, alone in its
    /// hash list or behind an aggregate with another tool's probe on the same function, and
    /// its own count is read, not the aggregate's or the other tool's.
    #[test]
    fn finds_our_probes_alone_and_in_aggregates() {
        let mut image = empty_table();
        let entry = trace_kprobe(
            &mut image,
            0xffff_8880_0001_0000,
            "rcu_segcblist_enqueue",
            false,
            &[41],
            3,
            0,
        );
        // Another tool's return probe on our return probe's function, with its own program.
        let theirs = trace_kprobe(
            &mut image,
            0xffff_8880_0002_0000,
            "rcu_cblist_dequeue",
            true,
            &[7],
            5,
            1,
        );
        let ours = trace_kprobe(
            &mut image,
            0xffff_8880_0003_0000,
            "rcu_cblist_dequeue",
            true,
            &[9, 42],
            4,
            2,
        );
        let aggregate = aggregate(&mut image, 0xffff_8880_0004_0000, &[theirs, ours]);
        // A module's own kprobe, whose handler is its own.
        let foreign = 0xffff_8880_0005_0000;
        image.put_u64(foreign + LAYOUT.kprobe_pre_handler, 0xffff_ffff_c000_0000);
        chain(&mut image, 3, &[foreign, entry]);
        chain(&mut image, 60, &[aggregate]);
        let found = walk(&image, &LAYOUT, &[OUR_ENTRY, OUR_RETURN]).unwrap();
        assert_eq!(
            found,
            HashMap::from([
                (
                    OUR_ENTRY,
                    Counted {
                        address: entry,
                        nmissed: 3,
                        returns_dropped: 0
                    }
                ),
                (
                    OUR_RETURN,
                    Counted {
                        address: ours,
                        nmissed: 4,
                        returns_dropped: 2
                    }
                ),
            ])
        );
    }

    #[test]
    fn a_walk_is_not_repeated_until_a_probe_is_registered_anew() {
        let mut image = empty_table();
        let entry = trace_kprobe(
            &mut image,
            0xffff_8880_0001_0000,
            "rcu_segcblist_enqueue",
            false,
            &[41],
            3,
            0,
        );
        chain(&mut image, 3, &[entry]);
        let mut found_at = None;
        let first = read_where_found(&image, &LAYOUT, &mut found_at, &[OUR_ENTRY]).unwrap();
        assert_eq!(first[&OUR_ENTRY].nmissed, 3);
        // Counted since, and gone from the table's lists: read where it was found.
        image.put_u64(entry + LAYOUT.kprobe_nmissed, 5);
        image.put_u64(LAYOUT.table + 8 * 3, 0);
        let again = read_where_found(&image, &LAYOUT, &mut found_at, &[OUR_ENTRY]).unwrap();
        assert_eq!(again[&OUR_ENTRY].nmissed, 5);
        // Forgotten (registered anew): the walk finds it no longer.
        found_at = None;
        let walked = read_where_found(&image, &LAYOUT, &mut found_at, &[OUR_ENTRY]).unwrap();
        assert!(walked.is_empty());
        // Another set of probes than the last walk's is walked for.
        let mut found_at = Some(vec![(key(&OUR_ENTRY), entry)]);
        let both = read_where_found(&image, &LAYOUT, &mut found_at, &[OUR_ENTRY, OUR_RETURN]);
        assert!(both.unwrap().is_empty());
    }

    /// A probe of the right function and side that runs another program is not ours, nor is
    /// an entry probe of a function we hook only on return.
    #[test]
    fn another_programs_probe_is_not_ours() {
        let mut image = empty_table();
        let other_program = trace_kprobe(
            &mut image,
            0xffff_8880_0001_0000,
            "rcu_segcblist_enqueue",
            false,
            &[40],
            3,
            0,
        );
        let other_side = trace_kprobe(
            &mut image,
            0xffff_8880_0002_0000,
            "rcu_cblist_dequeue",
            false,
            &[42],
            3,
            0,
        );
        chain(&mut image, 0, &[other_program, other_side]);
        assert!(
            walk(&image, &LAYOUT, &[OUR_ENTRY, OUR_RETURN])
                .unwrap()
                .is_empty()
        );
    }

    /// A list that loops, or leads into memory that cannot be read, ends the walk of that
    /// list: what was found is kept, nothing panics and nothing loops forever.
    #[test]
    fn broken_lists_end_the_walk() {
        let mut image = empty_table();
        let entry = trace_kprobe(
            &mut image,
            0xffff_8880_0001_0000,
            "rcu_segcblist_enqueue",
            false,
            &[41],
            8,
            0,
        );
        chain(&mut image, 1, &[entry]);
        // The probe's next pointer leads to itself.
        image.put_u64(entry + LAYOUT.kprobe_hlist, entry + LAYOUT.kprobe_hlist);
        // An aggregate whose list leads off into unmapped memory.
        let lost = aggregate(&mut image, 0xffff_8880_0006_0000, &[]);
        image.put_u64(lost + LAYOUT.kprobe_list, 0xffff_8880_dead_0000);
        chain(&mut image, 2, &[lost]);
        let found = walk(&image, &LAYOUT, &[OUR_ENTRY]).unwrap();
        assert_eq!(found[&OUR_ENTRY].nmissed, 8);
        // The table itself unreadable is an error, not an empty answer.
        assert!(walk(&Image::default(), &LAYOUT, &[OUR_ENTRY]).is_err());
    }
}
