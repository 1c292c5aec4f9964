//! What rcutrace needs from the kernel's BTF: the type ids of the functions that fentry and
//! fexit programs are loaded against, and the byte offsets of the kernel structures' fields
//! that programs read (aya builds no CO-RE relocations for Rust programs, so offsets reach
//! them as load-time constants).
//!
//! /sys/kernel/btf/vmlinux is several MiB, and parsed whole into several times that: this
//! module streams the file once for the few names wanted (once a run, beside the start, for
//! all it will ask: `read_ahead_in_background`) and keeps only what it found.

use std::{
    borrow::Borrow,
    collections::HashMap,
    fs::File,
    hash::Hash,
    io::{BufRead, BufReader, Read, Seek, SeekFrom},
    sync::Mutex,
};

use anyhow::{Context as _, Result, bail};

const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

/// The kernel BTF type ids of those of `names` that are functions. A name that several
/// functions share gets the first one's id, as aya's lookup by name would.
pub fn function_ids(names: &[&str]) -> Result<HashMap<String, u32>> {
    if let Some(ids) = read_ahead_answer(|pass| pass.function_ids(names)) {
        return Ok(ids);
    }
    Ok(read_kernel_btf(names, &[])?.function_ids)
}

/// A field of a kernel structure: `(struct name, member name)`, a direct member.
pub type Field = (&'static str, &'static str);

/// The byte offset of each of `fields` in its structure; a field this kernel's structure
/// lacks (or has only inside a nested anonymous member) is absent from the answer.
pub fn field_offsets(fields: &[Field]) -> Result<HashMap<Field, u32>> {
    if let Some(offsets) = read_ahead_answer(|pass| pass.field_offsets(fields)) {
        return Ok(offsets);
    }
    Ok(read_kernel_btf(&[], fields)?.field_offsets)
}

/// Reads the BTF once for everything a run is about to ask of it: the questions that follow
/// about these names are answered from this pass (and a second call for names already read
/// reads nothing). Each pass costs tens of milliseconds (a hundred and more under
/// emulation), most of it matching the 100,000 strings. A pass that fails is not kept: the
/// question that needs it then gets the error. Called by the pending pass itself, or by a
/// caller that waited for it.
fn read_ahead(functions: &[&str], fields: &[Field]) {
    let covered = answer_now(|pass| {
        pass.function_ids(functions)?;
        pass.field_offsets(fields)
    });
    if covered.is_some() {
        return;
    }
    let pass = read_kernel_btf(functions, fields).map(|found| Pass {
        functions: functions.iter().map(|f| f.to_string()).collect(),
        fields: fields.to_vec(),
        found,
    });
    match pass {
        Ok(pass) => *READ_AHEAD.lock().unwrap_or_else(|e| e.into_inner()) = Some(pass),
        Err(error) => log::debug!("reading the kernel BTF ahead: {error:#}"),
    }
}

/// Reads the BTF ahead (see `read_ahead`) on a thread of its own, so that a start does its
/// other work (loading, attaching what needs no BTF) meanwhile: a question asked before the
/// pass ends waits for it rather than reading the BTF again. Names a pass already looks for,
/// running or done, start nothing and wait for nothing.
pub fn read_ahead_in_background(functions: Vec<&'static str>, fields: Vec<Field>) {
    let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    let looked_for = |pass: &Option<Pending>| {
        pass.as_ref().is_some_and(|pass| {
            functions.iter().all(|f| pass.functions.contains(f))
                && fields.iter().all(|f| pass.fields.contains(f))
        })
    };
    if looked_for(&pending) {
        return;
    }
    wait(&mut pending);
    // Where no thread can be started, each question reads the BTF itself.
    let thread = {
        let (functions, fields) = (functions.clone(), fields.clone());
        std::thread::Builder::new()
            .name("btf pass".into())
            .spawn(move || {
                read_ahead(&functions, &fields);
                crate::marks::mark("kernel BTF read (beside the start)");
            })
            .ok()
    };
    *pending = Some(Pending {
        functions,
        fields,
        thread,
    });
}

static READ_AHEAD: Mutex<Option<Pass>> = Mutex::new(None);

/// The last pass started in the background (`read_ahead_in_background`).
static PENDING: Mutex<Option<Pending>> = Mutex::new(None);

struct Pending {
    functions: Vec<&'static str>,
    fields: Vec<Field>,
    /// `None` once it has ended and been waited for, or where it could not be started.
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Waits for the background pass to end, if one runs. The lock is held meanwhile, so that
/// every asker waits for it.
fn wait(pending: &mut Option<Pending>) {
    if let Some(thread) = pending.as_mut().and_then(|pass| pass.thread.take()) {
        // A pass that panicked is as one that failed: the asker reads the BTF itself.
        let _ = thread.join();
    }
}

fn read_ahead_answer<T>(answer: impl FnOnce(&Pass) -> Option<T>) -> Option<T> {
    wait(&mut PENDING.lock().unwrap_or_else(|e| e.into_inner()));
    answer_now(answer)
}

fn answer_now<T>(answer: impl FnOnce(&Pass) -> Option<T>) -> Option<T> {
    READ_AHEAD
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(answer)
}

/// A pass over the BTF and the names it looked for, found or not.
struct Pass {
    functions: Vec<String>,
    fields: Vec<Field>,
    found: Found,
}

impl Pass {
    /// What the pass found of `names`, if it looked for every one of them.
    fn function_ids(&self, names: &[&str]) -> Option<HashMap<String, u32>> {
        answer(
            &self.functions,
            &self.found.function_ids,
            names.iter().copied(),
        )
    }

    /// What the pass found of `fields`, if it looked for every one of them.
    fn field_offsets(&self, fields: &[Field]) -> Option<HashMap<Field, u32>> {
        answer(&self.fields, &self.found.field_offsets, fields)
    }
}

/// What was `found` of `asked`, if every one of them was looked for (found or not).
fn answer<'a, K, Q>(
    looked_for: &[K],
    found: &HashMap<K, u32>,
    asked: impl IntoIterator<Item = &'a Q>,
) -> Option<HashMap<K, u32>>
where
    K: Borrow<Q> + Eq + Hash + Clone,
    Q: Eq + Hash + ?Sized + 'a,
{
    let mut answer = HashMap::new();
    for name in asked {
        if !looked_for.iter().any(|looked| looked.borrow() == name) {
            return None;
        }
        if let Some((key, value)) = found.get_key_value(name) {
            answer.insert(key.clone(), *value);
        }
    }
    Some(answer)
}

fn read_kernel_btf(functions: &[&str], fields: &[Field]) -> Result<Found> {
    with_kernel_btf(|btf| scan(btf, functions, fields))
}

/// Both of what a pass reads the BTF through: a mapping or a buffered file.
trait BtfInput: BufRead + Seek {}
impl<T: BufRead + Seek> BtfInput for T {}

/// Runs `pass` over the kernel's BTF: mapped where the kernel allows it (since 6.16), else
/// read. A read of a sysfs file returns at most a page, so reading the BTF is a thousand
/// system calls or more, each copying; a mapping is one, and copies nothing.
fn with_kernel_btf<T>(pass: impl FnOnce(&mut dyn BtfInput) -> Result<T>) -> Result<T> {
    let file = File::open(VMLINUX).with_context(|| format!("opening {VMLINUX}"))?;
    // SAFETY: the kernel's BTF does not change while it runs, and the kernel maps it
    // read-only and private (it refuses a shared or writable mapping).
    let mapped = unsafe { memmap2::MmapOptions::new().map_copy_read_only(&file) };
    let found = match mapped {
        Ok(mapping) => pass(&mut std::io::Cursor::new(&mapping[..])),
        Err(error) => {
            log::debug!("mapping {VMLINUX}: {error}; reading it");
            pass(&mut BufReader::with_capacity(64 * 1024, file))
        }
    };
    found.with_context(|| format!("reading kernel BTF ({VMLINUX})"))
}

/// What one pass over the BTF found.
#[derive(Debug, Default)]
struct Found {
    function_ids: HashMap<String, u32>,
    field_offsets: HashMap<Field, u32>,
}

/// The position (from 0) of the first parameter of `function` named one of `names`, from the
/// kernel BTF; `None` if the kernel has no such function or it takes no such parameter (a
/// signature that differs between kernels: `rcu_report_exp_cpu_mult()` took its mask second
/// before 7.x, third since).
pub fn parameter_position(function: &str, names: &[&str]) -> Result<Option<u32>> {
    with_kernel_btf(|btf| parameters_in(btf, function, names))
}

fn parameters_in<R: BufRead + Seek>(
    mut input: R,
    function: &str,
    names: &[&str],
) -> Result<Option<u32>> {
    let header = read_header(&mut input)?;
    input.seek(SeekFrom::Start(
        u64::from(header.length) + u64::from(header.strings_at),
    ))?;
    let mut wanted = vec![function];
    wanted.extend(names);
    let offsets = name_offsets((&mut input).take(header.strings_length.into()), &wanted)?;
    input.seek(SeekFrom::Start(
        u64::from(header.length) + u64::from(header.types_at),
    ))?;
    let mut types = (&mut input).take(header.types_length.into());
    // Prototypes that take a parameter of a wanted name, by type id, with its position;
    // the function's prototype id once its FUNC is found (a FUNC may come before or after
    // its prototype).
    let mut positions: HashMap<u32, u32> = HashMap::new();
    let mut prototype = None;
    let mut id = 1u32;
    let mut common = [0u8; 12];
    let mut params = Vec::new();
    loop {
        match types.read_exact(&mut common) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e).context("reading the types"),
        }
        let word = |at: usize| {
            u32::from_le_bytes([common[at], common[at + 1], common[at + 2], common[at + 3]])
        };
        let (name_at, info, type_id) = (word(0), word(4), word(8));
        let kind = (info >> 24) & 0x1f;
        let vlen = info & 0xffff;
        let trailing = trailing_bytes(kind, vlen)
            .with_context(|| format!("type {id} has unknown kind {kind}"))?;
        if kind == KIND_FUNC && offsets.get(&name_at) == Some(&function) {
            prototype.get_or_insert(type_id);
        }
        if kind == KIND_FUNC_PROTO {
            params.resize(trailing as usize, 0);
            types
                .read_exact(&mut params)
                .context("reading a prototype's parameters")?;
            let found = params.chunks_exact(8).position(|param| {
                let name_at = u32::from_le_bytes([param[0], param[1], param[2], param[3]]);
                offsets
                    .get(&name_at)
                    .is_some_and(|name| names.contains(name))
            });
            if let Some(at) = found {
                positions.insert(id, at as u32);
            }
        } else {
            skip(&mut types, trailing).context("reading the types")?;
        }
        id += 1;
    }
    Ok(prototype.and_then(|prototype| positions.get(&prototype).copied()))
}

/// BTF's header (`struct btf_header`); its offsets count from its end.
struct Header {
    length: u32,
    types_at: u32,
    types_length: u32,
    strings_at: u32,
    strings_length: u32,
}

const MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;

fn scan<R: BufRead + Seek>(mut input: R, functions: &[&str], fields: &[Field]) -> Result<Found> {
    let header = read_header(&mut input)?;
    input.seek(SeekFrom::Start(
        u64::from(header.length) + u64::from(header.strings_at),
    ))?;
    let mut names: Vec<&str> = functions.to_vec();
    names.extend(
        fields
            .iter()
            .flat_map(|&(structure, member)| [structure, member]),
    );
    let offsets = name_offsets((&mut input).take(header.strings_length.into()), &names)?;
    input.seek(SeekFrom::Start(
        u64::from(header.length) + u64::from(header.types_at),
    ))?;
    find_types(
        (&mut input).take(header.types_length.into()),
        &offsets,
        functions,
        fields,
    )
}

fn read_header(input: &mut impl Read) -> Result<Header> {
    let mut bytes = [0u8; 24];
    input.read_exact(&mut bytes).context("reading the header")?;
    let u32_at =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    if u16::from_le_bytes([bytes[0], bytes[1]]) != MAGIC {
        bail!(
            "not little-endian BTF (magic {:#06x})",
            u16::from_le_bytes([bytes[0], bytes[1]])
        );
    }
    Ok(Header {
        length: u32_at(4),
        types_at: u32_at(8),
        types_length: u32_at(12),
        strings_at: u32_at(16),
        strings_length: u32_at(20),
    })
}

/// Where each of `names` is in the string section, by offset. A type's name may start inside a
/// longer string (a shared suffix), so every string's suffixes are matched: only against the
/// names that end in its last byte, since there are some 100,000 strings. The strings are
/// matched where they lie in the reader's buffer; only one cut by its end is copied.
fn name_offsets<'a>(mut strings: impl BufRead, names: &[&'a str]) -> Result<NameOffsets<'a>> {
    let mut by_last_byte: Vec<Vec<Suffix<'a>>> = vec![Vec::new(); 256];
    for name in names {
        if let Some(&last) = name.as_bytes().last() {
            by_last_byte[usize::from(last)].push(Suffix::of(name));
        }
    }
    let mut offsets = NameOffsets::default();
    let mut match_names = |string: &[u8], start: usize| {
        let Some(&last) = string.last() else {
            return;
        };
        let bucket = &by_last_byte[usize::from(last)];
        if bucket.is_empty() {
            return;
        }
        let tail = Suffix::tail_of(string);
        for name in bucket {
            if let Some(at) = name.ends(string, tail) {
                offsets.insert((start + at) as u32, name.name);
            }
        }
    };
    // The start of the string being read, and its bytes so far if a chunk's end cut it.
    let mut start = 0usize;
    let mut cut = Vec::new();
    let mut chunk_at = 0usize;
    loop {
        let chunk = strings.fill_buf().context("reading the strings")?;
        if chunk.is_empty() {
            return Ok(offsets);
        }
        let mut from = 0;
        // memchr looks at many bytes an instruction: the strings are megabytes, and under
        // emulation a byte at a time was most of this pass's time.
        while let Some(nul) = memchr::memchr(0, &chunk[from..]) {
            let end = from + nul;
            if cut.is_empty() {
                match_names(&chunk[from..end], start);
            } else {
                cut.extend_from_slice(&chunk[from..end]);
                match_names(&cut, start);
                cut.clear();
            }
            from = end + 1;
            start = chunk_at + from;
        }
        cut.extend_from_slice(&chunk[from..]);
        let read = chunk.len();
        strings.consume(read);
        chunk_at += read;
    }
}

/// The names found, by string offset: each of the types is looked up here by its name's
/// offset, with a hasher quicker than std's for that many small keys.
type NameOffsets<'a> = HashMap<u32, &'a str, foldhash::fast::FixedState>;

/// A name looked for at the end of each string: its last (up to) eight bytes as a word, so that
/// most strings are told apart from it by one comparison, without a call to compare bytes.
#[derive(Clone)]
struct Suffix<'a> {
    name: &'a str,
    tail: u64,
    mask: u64,
}

impl<'a> Suffix<'a> {
    fn of(name: &'a str) -> Self {
        let bytes = name.as_bytes();
        let kept = bytes.len().min(8);
        Suffix {
            name,
            tail: Self::tail_of(bytes),
            mask: if kept == 8 {
                u64::MAX
            } else {
                (1u64 << (kept * 8)) - 1
            },
        }
    }

    /// The last (up to) eight bytes of `bytes`, the last in the lowest byte.
    fn tail_of(bytes: &[u8]) -> u64 {
        bytes
            .iter()
            .rev()
            .take(8)
            .enumerate()
            .fold(0, |word, (i, &b)| word | u64::from(b) << (i * 8))
    }

    /// Where in `string` (whose `tail_of` is `tail`) this name starts, if it ends it.
    fn ends(&self, string: &[u8], tail: u64) -> Option<usize> {
        if tail & self.mask != self.tail || string.len() < self.name.len() {
            return None;
        }
        let at = string.len() - self.name.len();
        (string[at..] == *self.name.as_bytes()).then_some(at)
    }
}

/// The ids of the functions and the offsets of the fields named at `offsets`, from the type
/// section; type ids count from 1. Stops once everything wanted is found.
fn find_types(
    mut types: impl BufRead,
    offsets: &NameOffsets<'_>,
    functions: &[&str],
    fields: &[Field],
) -> Result<Found> {
    let functions_wanted = offsets
        .values()
        .filter(|name| functions.contains(name))
        .collect::<std::collections::HashSet<_>>()
        .len();
    let mut structs_wanted: Vec<&str> = fields.iter().map(|(structure, _)| *structure).collect();
    structs_wanted.sort_unstable();
    structs_wanted.dedup();
    let mut found = Found::default();
    let mut id = 1u32;
    let mut common = [0u8; 12];
    let mut members = Vec::new();
    while found.function_ids.len() < functions_wanted || !structs_wanted.is_empty() {
        match types.read_exact(&mut common) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e).context("reading the types"),
        }
        let name_at = u32::from_le_bytes([common[0], common[1], common[2], common[3]]);
        let info = u32::from_le_bytes([common[4], common[5], common[6], common[7]]);
        let kind = (info >> 24) & 0x1f;
        let vlen = info & 0xffff;
        let name = offsets.get(&name_at).copied();
        if kind == KIND_FUNC
            && let Some(name) = name.filter(|name| functions.contains(name))
        {
            found.function_ids.entry(name.to_string()).or_insert(id);
        }
        let trailing = trailing_bytes(kind, vlen)
            .with_context(|| format!("type {id} has unknown kind {kind}"))?;
        // The first struct of a wanted name is the kernel's (others of the name are forward
        // declarations, of another kind).
        match name.and_then(|name| structs_wanted.iter().position(|s| *s == name)) {
            Some(at) if kind == KIND_STRUCT => {
                let structure = structs_wanted.swap_remove(at);
                members.resize(trailing as usize, 0);
                types
                    .read_exact(&mut members)
                    .context("reading a struct's members")?;
                // A struct with kind_flag set packs a bitfield's size into the top byte.
                let bitfields = info & (1 << 31) != 0;
                for member in members.chunks_exact(12) {
                    let word = |at: usize| {
                        u32::from_le_bytes([
                            member[at],
                            member[at + 1],
                            member[at + 2],
                            member[at + 3],
                        ])
                    };
                    let Some(member_name) = offsets.get(&word(0)) else {
                        continue;
                    };
                    let bits = if bitfields {
                        word(8) & 0xff_ffff
                    } else {
                        word(8)
                    };
                    if let Some(field) = fields
                        .iter()
                        .find(|(s, m)| *s == structure && m == member_name)
                    {
                        found.field_offsets.insert(*field, bits / 8);
                    }
                }
            }
            _ => skip(&mut types, trailing).context("reading the types")?,
        }
        id += 1;
    }
    Ok(found)
}

/// Reads past `count` bytes.
fn skip(input: &mut impl BufRead, mut count: u64) -> std::io::Result<()> {
    while count > 0 {
        let available = input.fill_buf()?.len();
        if available == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let step = available.min(usize::try_from(count).unwrap_or(usize::MAX));
        input.consume(step);
        count -= step as u64;
    }
    Ok(())
}

/// The bytes that follow a type's common part, by kind and `vlen` (the kernel's
/// include/uapi/linux/btf.h).
fn trailing_bytes(kind: u32, vlen: u32) -> Option<u64> {
    let vlen = u64::from(vlen);
    Some(match kind {
        // ptr, fwd, typedef, volatile, const, restrict, func, float, type tag
        2 | 7..=12 | 16 | 18 => 0,
        // int, var, decl tag
        1 | 14 | 17 => 4,
        // array
        3 => 12,
        // struct, union (members); datasec (variables); enum64 (values)
        4 | 5 | 15 | 19 => 12 * vlen,
        // enum (values), func proto (parameters)
        6 | 13 => 8 * vlen,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    /// A BTF blob with these types (kind, vlen, name) and strings.
    fn blob(types: &[(u32, u32, u32)], strings: &[u8]) -> Vec<u8> {
        let mut type_bytes = Vec::new();
        for &(kind, vlen, name) in types {
            type_bytes.extend(name.to_le_bytes());
            type_bytes.extend(((kind << 24) | vlen).to_le_bytes());
            type_bytes.extend(0u32.to_le_bytes());
            let trailing = trailing_bytes(kind, vlen).unwrap();
            type_bytes.extend(std::iter::repeat_n(0xaa, trailing as usize));
        }
        let mut out = Vec::new();
        out.extend(MAGIC.to_le_bytes());
        out.extend([1, 0]);
        out.extend(24u32.to_le_bytes());
        out.extend(0u32.to_le_bytes());
        out.extend((type_bytes.len() as u32).to_le_bytes());
        out.extend((type_bytes.len() as u32).to_le_bytes());
        out.extend((strings.len() as u32).to_le_bytes());
        out.extend(type_bytes);
        out.extend(strings);
        out
    }

    #[test]
    fn finds_functions_by_name_past_every_kind() {
        // Offsets: 1 "int", 5 "call_rcu", 14 "xsynchronize_rcu" (so "synchronize_rcu" at 15).
        let strings = b"\0int\0call_rcu\0xsynchronize_rcu\0";
        let mut types: Vec<(u32, u32, u32)> = (1..=19).map(|kind| (kind, 2, 1)).collect();
        // A struct named call_rcu is not the function.
        types.push((4, 1, 5));
        types.push((KIND_FUNC, 1, 15)); // id 21
        types.push((KIND_FUNC, 1, 5)); // id 22
        types.push((KIND_FUNC, 1, 5)); // id 23: the same name again
        let blob = blob(&types, strings);
        let names = ["call_rcu", "synchronize_rcu", "absent"];
        // Read whole, and a few bytes at a time so that reads cut strings and types.
        for capacity in [blob.len(), 1, 3, 7] {
            let input = std::io::BufReader::with_capacity(capacity, Cursor::new(&blob));
            let ids = scan(input, &names, &[]).unwrap().function_ids;
            assert_eq!(ids.len(), 2, "read {capacity} bytes at a time");
            assert_eq!(
                ids["synchronize_rcu"], 21,
                "read {capacity} bytes at a time"
            );
            assert_eq!(ids["call_rcu"], 22, "read {capacity} bytes at a time");
        }
    }

    /// A BTF blob of raw type bytes and strings.
    fn raw_blob(types: &[u8], strings: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(MAGIC.to_le_bytes());
        out.extend([1, 0]);
        out.extend(24u32.to_le_bytes());
        out.extend(0u32.to_le_bytes());
        out.extend((types.len() as u32).to_le_bytes());
        out.extend((types.len() as u32).to_le_bytes());
        out.extend((strings.len() as u32).to_le_bytes());
        out.extend(types);
        out.extend(strings);
        out
    }

    #[test]
    fn finds_a_parameter_by_name_in_the_functions_prototype() {
        // Offsets: 1 "rnp", 5 "mask", 10 "mask_in", 18 "flags", 24 "report", 31 "other".
        let strings = b"\0rnp\0mask\0mask_in\0flags\0report\0other\0";
        let mut types = Vec::new();
        let mut add = |name: u32, kind: u32, type_id: u32, params: &[u32]| {
            types.extend(name.to_le_bytes());
            types.extend(((kind << 24) | params.len() as u32).to_le_bytes());
            types.extend(type_id.to_le_bytes());
            for &param in params {
                types.extend(param.to_le_bytes());
                types.extend(1u32.to_le_bytes());
            }
        };
        // id 1: other's prototype, with `mask` first; id 4: report's, after its FUNC (id 2).
        add(0, KIND_FUNC_PROTO, 0, &[5, 1]);
        add(24, KIND_FUNC, 4, &[]);
        add(31, KIND_FUNC, 1, &[]);
        add(0, KIND_FUNC_PROTO, 0, &[1, 18, 10, 5]);
        let blob = raw_blob(&types, strings);
        for capacity in [blob.len(), 1, 5] {
            let input = || std::io::BufReader::with_capacity(capacity, Cursor::new(&blob));
            assert_eq!(
                parameters_in(input(), "report", &["mask", "mask_in"]).unwrap(),
                Some(2)
            );
            assert_eq!(parameters_in(input(), "other", &["mask"]).unwrap(), Some(0));
            assert_eq!(
                parameters_in(input(), "report", &["nothing"]).unwrap(),
                None
            );
            assert_eq!(parameters_in(input(), "absent", &["mask"]).unwrap(), None);
        }
    }

    #[test]
    fn finds_field_offsets_of_the_struct_of_that_name() {
        // Offsets: 1 "rcu_node", 10 "qsmask", 17 "grplo", 23 "rcu_state", 33 "gp_seq".
        let strings = b"\0rcu_node\0qsmask\0grplo\0rcu_state\0gp_seq\0";
        let mut types = Vec::new();
        let mut add = |name: u32, kind: u32, flag: bool, members: &[(u32, u32)]| {
            types.extend(name.to_le_bytes());
            let info = (u32::from(flag) << 31) | (kind << 24) | members.len() as u32;
            types.extend(info.to_le_bytes());
            types.extend(0u32.to_le_bytes());
            for &(name, offset) in members {
                types.extend(name.to_le_bytes());
                types.extend(1u32.to_le_bytes());
                types.extend(offset.to_le_bytes());
            }
        };
        // A forward declaration of the name comes first; a struct of another name has a
        // member called gp_seq too.
        add(1, 7, false, &[]);
        add(10, KIND_STRUCT, false, &[(33, 64)]);
        add(1, KIND_STRUCT, false, &[(10, 64), (17, 256)]);
        // kind_flag: bitfield size in the top byte of each offset.
        add(23, KIND_STRUCT, true, &[(33, (5 << 24) | 8192)]);
        let mut blob = blob(&[], strings);
        let types_length = types.len() as u32;
        blob[12..16].copy_from_slice(&types_length.to_le_bytes());
        blob[16..20].copy_from_slice(&types_length.to_le_bytes());
        blob.splice(24..24, types);
        let fields = [
            ("rcu_node", "qsmask"),
            ("rcu_node", "grplo"),
            ("rcu_state", "gp_seq"),
            ("rcu_state", "absent"),
        ];
        for capacity in [blob.len(), 1, 5] {
            let input = std::io::BufReader::with_capacity(capacity, Cursor::new(&blob));
            let offsets = scan(input, &[], &fields).unwrap().field_offsets;
            assert_eq!(offsets.len(), 3, "read {capacity} bytes at a time");
            assert_eq!(offsets[&("rcu_node", "qsmask")], 8);
            assert_eq!(offsets[&("rcu_node", "grplo")], 32);
            assert_eq!(offsets[&("rcu_state", "gp_seq")], 1024);
        }
    }

    #[test]
    fn a_pass_answers_only_what_it_looked_for() {
        let pass = Pass {
            functions: vec!["call_rcu".into(), "call_rcu_hurry".into()],
            fields: vec![("rcu_state", "gp_seq"), ("rcu_state", "absent")],
            found: Found {
                function_ids: HashMap::from([("call_rcu".to_string(), 7)]),
                field_offsets: HashMap::from([(("rcu_state", "gp_seq"), 8)]),
            },
        };
        // Looked for and not found is an answer: the kernel has no such function or field.
        assert_eq!(
            pass.function_ids(&["call_rcu_hurry", "call_rcu"]),
            Some(HashMap::from([("call_rcu".to_string(), 7)]))
        );
        assert_eq!(pass.function_ids(&["call_rcu_hurry"]), Some(HashMap::new()));
        assert_eq!(pass.function_ids(&["call_rcu", "synchronize_rcu"]), None);
        assert_eq!(
            pass.field_offsets(&[("rcu_state", "absent"), ("rcu_state", "gp_seq")]),
            Some(HashMap::from([(("rcu_state", "gp_seq"), 8)]))
        );
        assert_eq!(pass.field_offsets(&[("rcu_node", "qsmask")]), None);
        assert_eq!(pass.function_ids(&[]), Some(HashMap::new()));
    }

    #[test]
    fn refuses_what_is_not_btf() {
        assert!(scan(Cursor::new(vec![0u8; 64]), &["call_rcu"], &[]).is_err());
        let mut unknown_kind = blob(&[(1, 0, 1)], b"\0int\0");
        unknown_kind[24 + 7] = 31; // kind 31 in the first type's info
        assert!(scan(Cursor::new(unknown_kind), &["int"], &[]).is_err());
    }

    #[test]
    fn a_name_ends_a_string_as_its_bytes_say_whatever_its_length() {
        let cases: [(&str, &str, Option<usize>); 9] = [
            ("lock", "lock", Some(0)),
            ("lock", "spin_lock", Some(5)),
            ("lock", "locks", None),
            ("lock", "ock", None),
            ("gp_seq_n", "rcu_gp_seq_n", Some(4)),
            ("gp_seq_needed", "gp_seq_needed", Some(0)),
            ("gp_seq_needed", "xgp_seq_needed", Some(1)),
            // The last eight bytes agree; the rest does not.
            ("gp_seq_needed", "gq_seq_needed", None),
            ("gp_seq_needed", "seq_needed", None),
        ];
        for (name, string, at) in cases {
            let suffix = Suffix::of(name);
            let string = string.as_bytes();
            assert_eq!(
                suffix.ends(string, Suffix::tail_of(string)),
                at,
                "{name:?} in {:?}",
                String::from_utf8_lossy(string)
            );
        }
    }
}
