//! Loads rcutrace's eBPF object, attaches programs as `probes::plan` says, reads the maps, and
//! detaches. The only module that talks to aya.

use std::{
    borrow::Cow,
    cell::OnceCell,
    collections::{HashMap, HashSet},
    fmt,
    os::fd::{AsFd as _, AsRawFd as _},
    sync::{Mutex, PoisonError},
    time::Instant,
};

use anyhow::{Context as _, Result, anyhow, bail};
use aya::{
    Ebpf, EbpfLoader, Pod,
    maps::{Array, HashMap as BpfHashMap, Map, MapData, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::{KProbe, Program, ProgramError, TracePoint, kprobe::KProbeLinkId},
    sys::SyscallError,
};

use rcutrace_common::{
    attribution::{Attribution, StackFrames},
    latency::{CONTROL_RUNNING, TASKS_RCU_KTHREADS},
};

use crate::{
    kernel::{
        self, btf,
        kprobe_table::{self, KprobeTable},
    },
    marks,
    model::detach::{DetachTime, HookKind},
    trace::{
        feature_probes,
        object::{self, Narrowed},
        own_links::{OwnLink, OwnPrograms},
        probes::{AttachChoice, Keys, Method, Probe, Side, plan, plan_on},
    },
};

/// The eBPF object built by build.rs (empty when the toolchain was missing at build time).
pub(crate) static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/rcutrace"));

/// A value for one of the eBPF side's load-time constants.
#[derive(Clone, Copy, Debug)]
pub enum Constant {
    U32(&'static str, u32),
    U64(&'static str, u64),
    /// The tasks-RCU kthreads' pids, for an array constant such as `TASKS_RCU_PIDS`.
    Pids(&'static str, [u32; TASKS_RCU_KTHREADS]),
    /// The number of entries of a map: large maps are declared with one entry, so that only
    /// the command that uses one pays for its memory.
    MaxEntries(&'static str, u32),
}

/// How one probe ended up.
#[derive(Debug)]
pub enum Attachment {
    Attached(Method),
    /// The function is not in /proc/kallsyms on this kernel (absent or inlined): the kernel
    /// found no such symbol for its kprobe, or /proc/kallsyms has none.
    Missing,
    /// Every planned method failed; what the kernel said to each.
    Failed(Vec<(Method, String)>),
}

pub struct Tracer {
    /// Dropping the object detaches and unloads every program; the maps stay readable.
    ebpf: Ebpf,
    maps: HashMap<String, Map>,
    /// Kernel ids of the programs attached, by the function and side they serve.
    program_ids: Vec<(Probe, u32)>,
    /// The kprobe links, for probes switched on and off during the window
    /// (`--sample-readers`).
    kprobes: Vec<KprobeLink>,
    /// Where the kprobe layer keeps its skipped-hit counts (`set_kprobe_table`), or why
    /// they cannot be read.
    kprobe_table: Option<std::result::Result<KprobeTable, String>>,
    /// The per-CPU arrays some loaded program uses, found at the first reading (`None`
    /// where the kernel does not list a program's maps).
    arrays_in_use: OnceCell<Option<HashSet<String>>>,
    /// Arrays of which only the first slots are written (`written_slots`), and how many.
    written_slots: HashMap<&'static str, u32>,
    /// The kprobe-multi links attached, each with the probes it serves.
    multi_links: Vec<(Vec<Probe>, OwnLink)>,
    /// The trampolines attached, each with its probe.
    trampolines: Vec<(Probe, OwnLink)>,
    /// The programs the run may load itself (`own_links`), and once the first is needed,
    /// them all taken from the object (or why they could not be).
    own_programs: HashSet<String>,
    relocated: Option<std::result::Result<OwnPrograms, String>>,
    /// The object's copy aya was given, kept until the start's attaching is done
    /// (`attaching_done`) to be narrowed again to the own programs rather than copied again.
    narrowed: Option<Narrowed>,
}

struct KprobeLink {
    probe: Probe,
    program: String,
    program_id: Option<u32>,
    /// `None` while detached.
    link: Option<KProbeLinkId>,
}

impl Tracer {
    /// Creates the maps and sets the load-time constants; no program is loaded yet, and only
    /// the programs named can be attached later: `programs` through aya, `own_programs` by
    /// `own_links`.
    pub fn load(
        constants: &[Constant],
        programs: &HashSet<String>,
        own_programs: HashSet<String>,
    ) -> Result<Self> {
        if OBJECT.is_empty() {
            bail!(
                "this rcutrace binary was built without its eBPF programs (the eBPF toolchain \
                 was missing when it was compiled); run scripts/setup, then rebuild"
            );
        }
        let mut loader = PREPARED_LOADER
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_else(|| {
                log::info!("no loader prepared at start-up: aya parses the kernel BTF");
                EbpfLoader::new()
            });
        // The programs need no relocation against the kernel's types.
        loader.btf(None);
        for constant in constants {
            match constant {
                Constant::U32(name, value) => loader.override_global(name, value, true),
                Constant::U64(name, value) => loader.override_global(name, value, true),
                Constant::Pids(name, pids) => loader.override_global(name, pids, true),
                Constant::MaxEntries(name, entries) => loader.map_max_entries(name, *entries),
            };
        }
        let narrowed = object::narrowed(OBJECT, |name| programs.contains(name))
            .context("reading rcutrace's eBPF object")?;
        marks::mark(format_args!(
            "eBPF object narrowed: {} of its {} programs kept",
            narrowed.kept, narrowed.programs
        ));
        // aya probes the kernel's features (a small program or map each) at its first load:
        // timed apart, and without a device map (`feature_probes`).
        feature_probes::features();
        marks::mark("kernel features probed");
        let mut ebpf = loader
            .load(&narrowed.object)
            .context("creating the eBPF maps (is the bpf() system call allowed here?)")?;
        let names: Vec<String> = ebpf.maps().map(|(name, _)| name.to_string()).collect();
        let maps = names
            .into_iter()
            .filter_map(|name| ebpf.take_map(&name).map(|map| (name, map)))
            .collect();
        Ok(Tracer {
            narrowed: Some(narrowed),
            ebpf,
            maps,
            program_ids: Vec::new(),
            kprobes: Vec::new(),
            kprobe_table: None,
            arrays_in_use: OnceCell::new(),
            written_slots: HashMap::new(),
            multi_links: Vec::new(),
            trampolines: Vec::new(),
            own_programs,
            relocated: None,
        })
    }

    /// Attaches each of `probes` with the first planned method that works: first, on a kernel
    /// that has them, the kprobe-multi links, one for all the probes each program serves;
    /// then each other probe by itself. A probe is `Missing` when the kernel said so on the
    /// way: its kprobe found no such symbol and, where the BTF was read for it, the BTF has
    /// no such function. `Failed` may still mean the function does not exist: the caller
    /// checks /proc/kallsyms only then, since reading it is slow (a fifth of a second and
    /// more).
    pub fn attach(
        &mut self,
        probes: &[Probe],
        choice: AttachChoice,
        keys: Keys,
    ) -> Vec<(Probe, Attachment)> {
        let mut targets = TrampolineTargets::new(trampoline_functions(probes, choice, keys));
        let batched = self.attach_batched(probes, choice, keys);
        probes
            .iter()
            .map(|probe| {
                if batched.contains(probe) {
                    return (*probe, Attachment::Attached(Method::KprobeMulti));
                }
                let rest = plan_on(probe, choice, keys, false);
                (*probe, self.attach_probe(probe, rest, &mut targets))
            })
            .collect()
    }

    /// Says the start's attaching is done: the object's copy (a megabyte) is let go, and
    /// what attaches later narrows the object anew.
    pub fn attaching_done(&mut self) {
        self.narrowed = None;
    }

    /// Attaches, by one kprobe-multi link per program, the probes whose plan starts with one,
    /// where the kernel has such links; returns those attached. A function the kernel lacks
    /// would make it refuse the whole link: it is left to its own attach, which says it is
    /// missing. A link the kernel refuses leaves its probes to theirs, said on stderr.
    fn attach_batched(&mut self, probes: &[Probe], choice: AttachChoice, keys: Keys) -> Vec<Probe> {
        let batchable: Vec<(&Probe, String)> = probes
            .iter()
            .filter_map(|probe| Some((probe, kprobe_multi_program(probe, choice, keys)?)))
            .collect();
        if batchable.is_empty() || !kernel::has_kprobe_multi() {
            return Vec::new();
        }
        // Asked of the kernel, not of the BTF (whose pass may still be running): by the
        // start's lookup where it asked about them all (`look_up_at_start`); a lookup that
        // fails checks nothing.
        let functions: Vec<&str> = batchable.iter().map(|(probe, _)| probe.function).collect();
        let present = match kernel::start_symbols_covering(&functions) {
            Some(found) => Some(Cow::Borrowed(found)),
            None => kernel::symbol_lookup::addresses(&functions)
                .ok()
                .map(Cow::Owned),
        };
        marks::mark("kprobe-multi functions looked up");
        let mut by_program: Vec<(String, Vec<Probe>)> = Vec::new();
        for (probe, program) in batchable {
            if present
                .as_ref()
                .is_some_and(|found| !found.contains_key(probe.function))
            {
                continue;
            }
            match by_program.iter_mut().find(|(p, _)| *p == program) {
                Some((_, members)) => members.push(*probe),
                None => by_program.push((program, vec![*probe])),
            }
        }
        let mut attached = Vec::new();
        for (program, members) in by_program {
            let functions: Vec<(&str, u64)> = members
                .iter()
                .map(|probe| (probe.function, probe.multi_cookie()))
                .collect();
            let names = members
                .iter()
                .map(|probe| probe.function)
                .collect::<Vec<_>>()
                .join(", ");
            let hooks: Vec<(String, u64)> = members
                .iter()
                .filter_map(|probe| Some((probe.multi_hook_program()?, probe.multi_cookie())))
                .collect();
            if !hooks.is_empty() {
                if let Err(e) = self.load_multi_hooks(&hooks) {
                    eprintln!(
                        "rcutrace: warning: the programs of {names} could not be made a \
                         kprobe-multi link's ({e:#}): each is attached by itself, which \
                         takes longer"
                    );
                    continue;
                }
                marks::mark(format_args!("{} programs of the link loaded", hooks.len()));
            }
            let linked = self.own_programs().and_then(|programs| {
                OwnLink::kprobe_multi(programs, &program, &functions, || {
                    marks::mark(format_args!("{program}: program loaded"));
                })
            });
            match linked {
                Ok(link) => {
                    log::info!("{names}: attached by kprobe-multi ({program})");
                    marks::mark(format_args!(
                        "kprobe-multi link of {} functions attached",
                        functions.len()
                    ));
                    if let Some(id) = link.program_id {
                        self.program_ids
                            .extend(members.iter().map(|probe| (*probe, id)));
                    }
                    attached.extend(members.iter().copied());
                    self.multi_links.push((members, link));
                }
                Err(e) => eprintln!(
                    "rcutrace: warning: the kernel refused a kprobe-multi link for {names} ({e:#}): \
                     each is attached by itself, which takes longer; where that puts a \
                     trampoline on it, the tasks-RCU work of that attach may be counted as \
                     the system's"
                ),
            }
        }
        attached
    }

    /// Loads `hooks`, each the program of a function and its cookie, into the table the
    /// kprobe-multi link's program tail-calls them from.
    fn load_multi_hooks(&mut self, hooks: &[(String, u64)]) -> Result<()> {
        let table = match self.maps.get(super::probes::MULTI_HOOK_TABLE) {
            Some(Map::ProgramArray(data)) => data.fd().as_fd().as_raw_fd(),
            _ => bail!(
                "the eBPF object has no table {}",
                super::probes::MULTI_HOOK_TABLE
            ),
        };
        // SAFETY: the map's descriptor stays open while the tracer holds its maps.
        let table = unsafe { std::os::fd::BorrowedFd::borrow_raw(table) };
        let programs = self.own_programs()?;
        OwnLink::load_hooks(programs, table, hooks)
    }

    fn attach_probe(
        &mut self,
        probe: &Probe,
        planned: Vec<(Method, String)>,
        targets: &mut TrampolineTargets,
    ) -> Attachment {
        let mut failures = Vec::new();
        let mut no_such_symbol = false;
        for (method, program) in planned {
            match self.attach_one(method, &program, probe, targets) {
                Ok(link) => {
                    log::info!("{}: attached by {method} ({program})", probe.function);
                    marks::mark(format_args!("{} attached", probe.function));
                    let program_id = self.program_id(&program, probe);
                    if let Some(id) = program_id {
                        self.program_ids.push((*probe, id));
                    }
                    if let Some(link) = link {
                        self.kprobes.push(KprobeLink {
                            probe: *probe,
                            program: program.clone(),
                            program_id,
                            link: Some(link),
                        });
                    }
                    return Attachment::Attached(method);
                }
                Err(e) => {
                    log::info!("{}: {method} failed: {e:#}", probe.function);
                    no_such_symbol |= kprobe_found_no_symbol(&e);
                    failures.push((method, format!("{e:#}")));
                }
            }
        }
        if no_such_symbol && !targets.has_function(probe.function) {
            return Attachment::Missing;
        }
        Attachment::Failed(failures)
    }

    /// Attaches `program` to `probe`'s function; a kprobe's link is returned, for switching it.
    fn attach_one(
        &mut self,
        method: Method,
        program: &str,
        probe: &Probe,
        targets: &mut TrampolineTargets,
    ) -> Result<Option<KProbeLinkId>> {
        let function = probe.function;
        if method.is_trampoline() {
            let btf_id = targets.id(function)?;
            // A trampoline's program is verified against its function at load: timed apart
            // from the attach, which builds and patches in the trampoline.
            let loaded = || marks::mark(format_args!("{function}: program loaded"));
            let programs = self.own_programs()?;
            let link = OwnLink::trampoline(programs, program, probe.side, btf_id, loaded)?;
            self.trampolines.push((*probe, link));
            return Ok(None);
        }
        let program: &mut Program = self
            .ebpf
            .program_mut(program)
            .ok_or_else(|| anyhow!("program {program} missing from the eBPF object"))?;
        match method {
            Method::KprobeMulti => {
                bail!("a kprobe-multi link attaches many functions at once (attach_batched)")
            }
            Method::Fentry | Method::Fexit => unreachable!("attached above"),
            Method::Kprobe | Method::Kretprobe => {
                let kprobe: &mut KProbe = program.try_into()?;
                // One program may serve several functions (the own-work hooks): loaded once.
                if kprobe.fd().is_err() {
                    kprobe.load().context("loading the program")?;
                }
                return Ok(Some(kprobe.attach(function, 0).context("attaching")?));
            }
            Method::Tracepoint => {
                let (category, name) = function
                    .split_once(':')
                    .ok_or_else(|| anyhow!("{function} is not a tracepoint (category:name)"))?;
                let tracepoint: &mut TracePoint = program.try_into()?;
                tracepoint.load().context("loading the program")?;
                tracepoint.attach(category, name).context("attaching")?;
            }
        }
        Ok(None)
    }

    /// Detaches (`on` false) or attaches again (`on` true) the kprobe attached for `probe`;
    /// its program stays loaded in between. Detached, the kprobe costs the kernel nothing.
    pub fn switch_kprobe(&mut self, probe: &Probe, on: bool) -> Result<()> {
        let entry = self
            .kprobes
            .iter_mut()
            .find(|k| k.probe == *probe)
            .ok_or_else(|| anyhow!("{}: no kprobe attached to switch", probe.function))?;
        let program: &mut KProbe = self
            .ebpf
            .program_mut(&entry.program)
            .ok_or_else(|| anyhow!("program {} missing from the eBPF object", entry.program))?
            .try_into()?;
        if let Some(Ok(table)) = &self.kprobe_table {
            table.forget();
        }
        match (entry.link.take(), on) {
            (Some(link), false) => program
                .detach(link)
                .with_context(|| format!("detaching the kprobe on {}", probe.function))?,
            (None, true) => {
                let link = program
                    .attach(probe.function, 0)
                    .with_context(|| format!("attaching the kprobe on {} again", probe.function))?;
                entry.link = Some(link);
            }
            (link, _) => entry.link = link,
        }
        Ok(())
    }

    /// The programs the run loads itself, relocated against its maps at the first need.
    fn own_programs(&mut self) -> Result<&OwnPrograms> {
        if self.relocated.is_none() {
            let maps = &self.maps;
            let map_fd = |name: &str| {
                maps.get(name)
                    .and_then(map_data)
                    .map(|m| m.fd().as_fd().as_raw_fd())
            };
            let own = &self.own_programs;
            let narrowed = match self.narrowed.take() {
                Some(mut copy) => copy
                    .narrow_again(OBJECT, |name| own.contains(name))
                    .map(|()| copy),
                None => object::narrowed(OBJECT, |name| own.contains(name)),
            };
            let relocated = narrowed
                .and_then(|narrowed| OwnPrograms::relocated(&narrowed.object, map_fd))
                .map_err(|e| format!("relocating the programs rcutrace loads itself: {e:#}"));
            if let Ok(programs) = &relocated {
                marks::mark(format_args!("own programs relocated: {}", programs.count()));
            }
            self.relocated = Some(relocated);
        }
        match self.relocated.as_ref().expect("relocated above") {
            Ok(programs) => Ok(programs),
            Err(e) => Err(anyhow!(e.clone())),
        }
    }

    /// The programs `own_links` loaded and attached: the kprobe-multi links' and the
    /// trampolines'.
    fn own_links(&self) -> impl Iterator<Item = &OwnLink> {
        let batched = self.multi_links.iter().map(|(_, link)| link);
        batched.chain(self.trampolines.iter().map(|(_, link)| link))
    }

    /// The kernel id of `program`, attached for `probe`.
    fn program_id(&self, program: &str, probe: &Probe) -> Option<u32> {
        if let Some((_, link)) = self.trampolines.iter().find(|(p, _)| p == probe) {
            return link.program_id;
        }
        let info = self.ebpf.program(program)?.info();
        info.map(|info| info.id()).ok()
    }

    /// Skipped hits by program id, for every program loaded.
    pub fn missed_by_program_id(&self) -> HashMap<u32, u64> {
        use std::os::fd::AsFd as _;
        let loaded: Vec<_> = self
            .ebpf
            .programs()
            .filter_map(|(_, program)| program.fd().ok())
            .collect();
        let own = self.own_links().map(OwnLink::program);
        let programs = loaded.len() + self.own_links().count();
        let mut missed =
            kernel::misses::missed_by_program_id(loaded.iter().map(|fd| fd.as_fd()).chain(own));
        if missed.len() < programs {
            log::warn!(
                "the kernel gave the skipped hits of {} of {programs} programs",
                missed.len(),
            );
        }
        // The hits a link's function-probe layer skipped never reached its program: counted
        // with the program's own.
        for (_, link) in &self.multi_links {
            if let (Some(id), Some(skipped)) = (link.program_id, link.missed()) {
                *missed.entry(id).or_insert(0) += skipped;
            }
        }
        log::debug!("skipped hits by program id: {missed:?}");
        missed
    }

    /// Where the kprobe layer's counts of skipped hits are (`KprobeTable::locate`), given
    /// once the kprobes are attached; the error says why they cannot be read (then the figure
    /// is a lower bound), if any kprobe was attached.
    pub fn set_kprobe_table(
        &mut self,
        located: std::result::Result<KprobeTable, String>,
    ) -> std::result::Result<(), String> {
        if self.kprobes.is_empty() {
            return Ok(());
        }
        let answer = located.as_ref().map(|_| ()).map_err(Clone::clone);
        self.kprobe_table = Some(located);
        answer
    }

    /// What the kprobe layer counted for each kprobe attached now (none before
    /// `set_kprobe_table`, or where it failed).
    pub fn kprobe_misses(&self) -> Vec<(Probe, kprobe_table::Counted)> {
        let Some(Ok(table)) = &self.kprobe_table else {
            return Vec::new();
        };
        let attached: Vec<(Probe, kprobe_table::Ours<'_>)> = self
            .kprobes
            .iter()
            .filter(|k| k.link.is_some())
            .filter_map(|k| {
                let ours = kprobe_table::Ours {
                    function: k.probe.function,
                    is_return: k.probe.side == Side::Return,
                    program_id: k.program_id?,
                };
                Some((k.probe, ours))
            })
            .collect();
        let ours: Vec<kprobe_table::Ours<'_>> = attached.iter().map(|(_, o)| *o).collect();
        let found = match table.read(&ours) {
            Ok(found) => found,
            Err(e) => {
                log::warn!("reading the kprobe layer's skipped hits: {e:#}");
                return Vec::new();
            }
        };
        if found.len() < ours.len() {
            log::warn!(
                "the kprobe table held {} of rcutrace's {} kprobes",
                found.len(),
                ours.len()
            );
        }
        log::debug!("kprobe layer's counts: {found:?}");
        attached
            .into_iter()
            .filter_map(|(probe, ours)| found.get(&ours).map(|counted| (probe, *counted)))
            .collect()
    }

    /// Kernel ids of the programs serving `probes` (their skipped hits are counted by id).
    /// A program that serves several of them (a kprobe-multi link's) is named once.
    pub fn program_ids<'a>(&'a self, probes: &'a [Probe]) -> impl Iterator<Item = u32> + 'a {
        let mut ids: Vec<u32> = self
            .program_ids
            .iter()
            .filter(|(p, _)| probes.contains(p))
            .map(|(_, id)| *id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
    }

    /// Detaches and unloads every program, one kind of hook after the other, and says how
    /// long each kind took; the maps stay readable. Kprobes are counted by their links (one
    /// program may serve several functions), the others by their programs.
    pub fn detach(&mut self) -> Vec<DetachTime> {
        let kprobe_links = self.kprobes.iter().filter(|k| k.link.is_some()).count();
        // Their links go with their programs.
        self.kprobes.clear();
        let batched: usize = self
            .multi_links
            .iter()
            .map(|(probes, _)| probes.len())
            .sum();
        let mut times = Vec::new();
        for kind in HookKind::ALL {
            let started = Instant::now();
            let mut programs = 0;
            if kind == HookKind::Kprobe {
                programs += self.multi_links.len();
                self.multi_links.clear();
            }
            if kind == HookKind::Trampoline {
                programs += self.trampolines.len();
                self.trampolines.clear();
            }
            for (name, program) in self.ebpf.programs_mut() {
                let unloaded = match (kind, program) {
                    (HookKind::Kprobe, Program::KProbe(p)) => p.unload(),
                    (HookKind::Tracepoint, Program::TracePoint(p)) => p.unload(),
                    _ => continue,
                };
                match unloaded {
                    Ok(()) => programs += 1,
                    // A program of the object this run did not load.
                    Err(ProgramError::NotLoaded) => {}
                    // Dropping the object tries again; the kernel frees it with its file.
                    Err(e) => log::warn!("detaching {name}: {e}"),
                }
            }
            let hooks = match kind {
                HookKind::Kprobe => kprobe_links + batched,
                _ => programs,
            };
            if programs > 0 {
                times.push(DetachTime {
                    kind,
                    hooks,
                    took: started.elapsed(),
                });
            }
        }
        times
    }

    /// Opens or closes the tracing window for the programs that check it (`CONTROL`).
    pub fn set_running(&mut self, running: bool) -> Result<()> {
        let map = self
            .maps
            .get_mut("CONTROL")
            .ok_or_else(|| anyhow!("map CONTROL missing from the eBPF object"))?;
        let mut control: Array<&mut MapData, u32> =
            Array::try_from(map).context("opening CONTROL")?;
        control
            .set(CONTROL_RUNNING, u32::from(running), 0)
            .context("opening or closing the tracing window")
    }

    /// Marks thread `tid` as the launcher of `run`'s command (`on`), or no longer: what it
    /// forks meanwhile is followed as the command; nothing it does itself counts.
    pub fn follow_launcher(&mut self, tid: u32, on: bool) -> Result<()> {
        let map = self
            .maps
            .get_mut("TREE")
            .ok_or_else(|| anyhow!("map TREE missing from the eBPF object"))?;
        let mut tree: BpfHashMap<&mut MapData, u32, u8> =
            BpfHashMap::try_from(map).context("opening TREE")?;
        let done = if on {
            tree.insert(tid, rcutrace_common::followed::TREE_LAUNCHER, 0)
        } else {
            tree.remove(&tid)
        };
        done.with_context(|| format!("marking thread {tid} as the command's launcher"))
    }

    /// Whether work `run`'s command caused is still queued or running.
    pub fn caused_work_unfinished(&self) -> Result<u64> {
        let queued = self.hash_entries::<u64, u8>("CAUSED")?.len();
        let running = self.hash_entries::<u32, u8>("WORKING")?.len();
        Ok((queued + running) as u64)
    }

    /// Takes the ring buffer of latency samples, for the session to drain while tracing runs.
    pub fn take_samples(&mut self) -> Result<RingBuf<MapData>> {
        let map = self
            .maps
            .remove("SAMPLES")
            .ok_or_else(|| anyhow!("map SAMPLES missing from the eBPF object"))?;
        RingBuf::try_from(map).context("opening the sample ring buffer")
    }

    /// Every entry of the `--by` count map.
    pub fn keyed_counts(&self) -> Result<Vec<(Attribution, u64)>> {
        let map: BpfHashMap<&MapData, Attribution, u64> =
            BpfHashMap::try_from(self.map("KEYED_COUNTS")?).context("opening KEYED_COUNTS")?;
        map.iter()
            .map(|entry| entry.context("reading KEYED_COUNTS"))
            .collect()
    }

    /// The return addresses of a kernel stack kept by the programs, deepest first.
    pub fn stack(&self, stack: u64) -> Result<Vec<u64>> {
        let map: BpfHashMap<&MapData, u64, StackFrames> =
            BpfHashMap::try_from(self.map("STACKS")?).context("opening STACKS")?;
        let frames = map
            .get(&stack, 0)
            .with_context(|| format!("reading kernel stack {stack:#x}"))?;
        Ok(frames.into_iter().take_while(|&ip| ip != 0).collect())
    }

    fn map(&self, name: &str) -> Result<&Map> {
        self.maps
            .get(name)
            .ok_or_else(|| anyhow!("map {name} missing from the eBPF object"))
    }

    /// Whether a loaded program uses per-CPU array `name`, so that reading it can find
    /// anything (where the kernel does not say, every array is taken as used). Asked once the
    /// programs are loaded: at 64 CPUs each array costs a read of a value per slot and CPU,
    /// and most commands write two or three of the object's arrays.
    pub fn array_in_use(&self, name: &str) -> bool {
        self.arrays_in_use
            .get_or_init(|| self.find_arrays_in_use())
            .as_ref()
            .is_none_or(|used| used.contains(name))
    }

    fn find_arrays_in_use(&self) -> Option<HashSet<String>> {
        let mut used_ids = HashSet::new();
        for (_, program) in self.ebpf.programs() {
            // A program that is not loaded has no info, and uses nothing.
            if let Ok(info) = program.info() {
                used_ids.extend(info.map_ids().ok()??);
            }
        }
        for link in self.own_links() {
            used_ids.extend(kernel::bpf_programs::map_ids(link.program())?);
        }
        let used: HashSet<String> = self
            .maps
            .iter()
            .filter(|(_, map)| match map {
                Map::PerCpuArray(data) => {
                    data.info().is_ok_and(|info| used_ids.contains(&info.id()))
                }
                _ => false,
            })
            .map(|(name, _)| name.clone())
            .collect();
        log::debug!("per-CPU arrays the programs use: {used:?}");
        Some(used)
    }

    /// Says that the run's programs write only the first `slots` slots of array `name`
    /// (`count` writes 7 of `COUNTS`' 48): readings read no more, since at 64 CPUs each slot
    /// read costs a value per CPU.
    pub fn set_written_slots(&mut self, name: &'static str, slots: u32) {
        self.written_slots.insert(name, slots);
    }

    /// Every slot of a per-CPU u64 array that the programs write, summed over the CPUs (the
    /// slots past those read as none): in one system call where the kernel takes a batch
    /// (5.6 and later), else a lookup per slot. Interval reports read every counter array,
    /// and a lookup each costs more than the rest of the report.
    pub fn per_cpu_sums(&self, name: &str) -> Result<Vec<u64>> {
        let array: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.map(name)?).with_context(|| format!("opening {name}"))?;
        let slots = self
            .written_slots
            .get(name)
            .map_or(array.len(), |&written| written.min(array.len()));
        if slots == 0 {
            return Ok(Vec::new());
        }
        if let Map::PerCpuArray(data) = self.map(name)?
            && let Ok(cpus) = aya::util::nr_cpus()
            && let Some(sums) = batched_per_cpu_sums(data, slots, cpus)
        {
            return Ok(sums);
        }
        (0..slots)
            .map(|index| {
                let values = array
                    .get(&index, 0)
                    .with_context(|| format!("reading {name}[{index}]"))?;
                Ok(sum_over_cpus(&values))
            })
            .collect()
    }

    /// One slot of a per-CPU array of plain-data values, a value per CPU.
    pub fn per_cpu_entries<V: Pod>(&self, name: &str, index: u32) -> Result<Vec<V>> {
        let array: PerCpuArray<&MapData, V> =
            PerCpuArray::try_from(self.map(name)?).with_context(|| format!("opening {name}"))?;
        let values = array
            .get(&index, 0)
            .with_context(|| format!("reading {name}[{index}]"))?;
        Ok(values.iter().copied().collect())
    }

    /// One slot of a per-CPU u64 array, summed over the CPUs.
    pub fn counter(&self, name: &str, index: u32) -> Result<u64> {
        Ok(sum_over_cpus(&self.per_cpu_values(name, index)?))
    }

    /// One slot of a per-CPU u64 array, a value per CPU.
    pub fn per_cpu_values(&self, name: &str, index: u32) -> Result<Vec<u64>> {
        let array: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.map(name)?).with_context(|| format!("opening {name}"))?;
        let values = array
            .get(&index, 0)
            .with_context(|| format!("reading {name}[{index}]"))?;
        Ok(values.iter().copied().collect())
    }

    /// The first `count` entries of an array of plain-data values.
    pub fn array_entries<V: Pod>(&self, name: &str, count: u32) -> Result<Vec<V>> {
        let array: Array<&MapData, V> =
            Array::try_from(self.map(name)?).with_context(|| format!("opening {name}"))?;
        (0..count.min(array.len()))
            .map(|index| {
                array
                    .get(&index, 0)
                    .with_context(|| format!("reading {name}[{index}]"))
            })
            .collect()
    }

    /// All entries of a hash map of plain-data keys and values.
    pub fn hash_entries<K: Pod, V: Pod>(&self, name: &str) -> Result<Vec<(K, V)>> {
        let map: BpfHashMap<&MapData, K, V> =
            BpfHashMap::try_from(self.map(name)?).with_context(|| format!("opening {name}"))?;
        map.iter()
            .map(|entry| entry.with_context(|| format!("reading {name}")))
            .collect()
    }

    /// All entries of a per-CPU hash map, a value per CPU.
    pub fn per_cpu_hash_entries<K: Pod, V: Pod>(&self, name: &str) -> Result<Vec<(K, Vec<V>)>> {
        let map: PerCpuHashMap<&MapData, K, V> =
            PerCpuHashMap::try_from(self.map(name)?).with_context(|| format!("opening {name}"))?;
        map.iter()
            .map(|entry| {
                let (key, values) = entry.with_context(|| format!("reading {name}"))?;
                Ok((key, values.iter().copied().collect()))
            })
            .collect()
    }

    /// The calls still in flight, but rcutrace's own: `(thread id, timed function index)`.
    pub fn in_flight(&self) -> Result<Vec<(u32, u32)>> {
        use rcutrace_common::latency::{InFlight, InFlightKey, OWN_CALL_START};
        let map: BpfHashMap<&MapData, InFlightKey, InFlight> =
            BpfHashMap::try_from(self.map("IN_FLIGHT")?).context("opening IN_FLIGHT")?;
        let mut calls = Vec::new();
        for entry in map.iter() {
            let (key, call) = entry.context("reading IN_FLIGHT")?;
            // rcutrace's own doing is accounted for as left out.
            if call.start_ns != OWN_CALL_START {
                calls.push((key.tid, key.timed));
            }
        }
        Ok(calls)
    }
}

/// The functions of `probes` whose plan starts with a kprobe-multi link (`attach_batched`).
pub fn kprobe_multi_functions(
    probes: &[Probe],
    choice: AttachChoice,
    keys: Keys,
) -> Vec<&'static str> {
    functions_where(probes, |probe| {
        kprobe_multi_program(probe, choice, keys).is_some()
    })
}

/// The program of `probe`'s kprobe-multi link, if its plan starts with one.
fn kprobe_multi_program(probe: &Probe, choice: AttachChoice, keys: Keys) -> Option<String> {
    match plan(probe, choice, keys).into_iter().next() {
        Some((Method::KprobeMulti, program)) => Some(program),
        _ => None,
    }
}

/// The functions of `probes` that the plan may attach a trampoline to: their BTF ids are read
/// for the attach.
pub fn trampoline_functions(
    probes: &[Probe],
    choice: AttachChoice,
    keys: Keys,
) -> Vec<&'static str> {
    functions_where(probes, |probe| {
        plan(probe, choice, keys)
            .iter()
            .any(|(method, _)| method.is_trampoline())
    })
}

/// The functions of the probes `planned` picks.
fn functions_where(probes: &[Probe], planned: impl Fn(&Probe) -> bool) -> Vec<&'static str> {
    probes
        .iter()
        .filter(|probe| planned(probe))
        .map(|probe| probe.function)
        .collect()
}

/// The functions of one `attach` that may get a trampoline, and their kernel BTF ids, read
/// for all of them at the first trampoline's need and dropped after the attach.
struct TrampolineTargets<'a> {
    functions: Vec<&'a str>,
    ids: Option<std::result::Result<HashMap<String, u32>, String>>,
}

impl<'a> TrampolineTargets<'a> {
    fn new(functions: Vec<&'a str>) -> Self {
        TrampolineTargets {
            functions,
            ids: None,
        }
    }

    fn ids(&mut self) -> Result<&HashMap<String, u32>> {
        let functions = &self.functions;
        self.ids
            .get_or_insert_with(|| btf::function_ids(functions).map_err(|e| format!("{e:#}")))
            .as_ref()
            .map_err(|e| anyhow!(e.clone()))
    }

    /// The kernel BTF id of `function`, which the kernel hooks a trampoline by.
    fn id(&mut self, function: &str) -> Result<u32> {
        self.ids()?
            .get(function)
            .copied()
            .ok_or_else(|| anyhow!("the kernel BTF has no function {function}"))
    }

    /// Whether `function` may exist as far as the BTF pass knows: `false` only when the pass
    /// read the BTF for it and found no such function.
    fn has_function(&self, function: &str) -> bool {
        match &self.ids {
            Some(Ok(ids)) if self.functions.contains(&function) => ids.contains_key(function),
            _ => true,
        }
    }
}

/// The map behind `map`, for the kinds rcutrace's object declares.
fn map_data(map: &Map) -> Option<&MapData> {
    match map {
        Map::Array(data)
        | Map::HashMap(data)
        | Map::LruHashMap(data)
        | Map::PerCpuArray(data)
        | Map::PerCpuHashMap(data)
        | Map::PerCpuLruHashMap(data)
        | Map::ProgramArray(data)
        | Map::RingBuf(data)
        | Map::StackTraceMap(data) => Some(data),
        _ => None,
    }
}

/// Whether a kprobe's attach failed because the kernel has no symbol of that name: creating
/// the kprobe event (`perf_event_open`) returns ENOENT when the kernel's own symbol lookup,
/// the one /proc/kallsyms shows, finds nothing. (An ENOENT from opening the kprobe event
/// source's files means no kprobes at all, and is another error.)
fn kprobe_found_no_symbol(error: &anyhow::Error) -> bool {
    matches!(
        error.downcast_ref::<ProgramError>(),
        Some(ProgramError::SyscallError(SyscallError { call: "perf_event_open", io_error }))
            if io_error.raw_os_error() == Some(libc::ENOENT)
    )
}

/// A per-CPU counter's total (counters wrap; so do their differences).
/// `BPF_MAP_LOOKUP_BATCH`'s attributes (`union bpf_attr`'s `batch`).
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// The first `slots` slots of a per-CPU array of u64, each summed over the CPUs, in one
/// `BPF_MAP_LOOKUP_BATCH`; `None` where the kernel or the map does not take it.
fn batched_per_cpu_sums(data: &MapData, slots: u32, cpus: usize) -> Option<Vec<u64>> {
    use std::os::fd::AsFd as _;
    let slots = slots as usize;
    let mut keys = vec![0u32; slots];
    let mut values = vec![0u64; slots * cpus];
    let mut out_batch = 0u32;
    let mut attr = BatchAttr {
        out_batch: &mut out_batch as *mut u32 as u64,
        keys: keys.as_mut_ptr() as u64,
        values: values.as_mut_ptr() as u64,
        count: u32::try_from(slots).ok()?,
        map_fd: u32::try_from(data.fd().as_fd().as_raw_fd()).ok()?,
        ..BatchAttr::default()
    };
    // SAFETY: the attributes point at buffers of `slots` keys and `slots` per-CPU values,
    // which live until the call returns.
    let result = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_LOOKUP_BATCH,
            &mut attr as *mut BatchAttr,
            std::mem::size_of::<BatchAttr>(),
        )
    };
    // ENOENT: the batch reached the map's end, as one of every slot does.
    let whole = result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT);
    if !whole || attr.count as usize != slots {
        return None;
    }
    per_cpu_sums_of(&keys, &values, cpus)
}

/// Each slot's sum, from a batch: the slots' keys in the order read, and after each other
/// their values, `cpus` of them each. `None` unless every slot was read once.
fn per_cpu_sums_of(keys: &[u32], values: &[u64], cpus: usize) -> Option<Vec<u64>> {
    let mut sums = vec![None; keys.len()];
    for (key, slot_values) in keys.iter().zip(values.chunks(cpus.max(1))) {
        let sum = sums.get_mut(*key as usize)?;
        if sum.is_some() {
            return None;
        }
        *sum = Some(sum_over_cpus(slot_values));
    }
    sums.into_iter().collect()
}

fn sum_over_cpus(values: &[u64]) -> u64 {
    values.iter().fold(0, |sum, v| sum.wrapping_add(*v))
}

/// The loader `prepare_loader` made, taken by the one `Tracer::load` of the run.
static PREPARED_LOADER: Mutex<Option<EbpfLoader<'static>>> = Mutex::new(None);

/// Makes the eBPF loader without the kernel's BTF (`loader_without_kernel_btf`). Called
/// first in `main`, while rcutrace has one thread: the way it is made refuses every file
/// the process opens meanwhile, and a thread opening one then (the kprobe table's
/// /proc/kallsyms, a terminal) would fail with "No file descriptors available".
pub fn prepare_loader() {
    let loader = loader_without_kernel_btf();
    *PREPARED_LOADER
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(loader);
}

/// An `EbpfLoader` that has not parsed the kernel's BTF.
///
/// aya 0.14's `EbpfLoader::new()` parses all of /sys/kernel/btf/vmlinux (over 15 MiB of memory
/// and about a fifth of a second in a small VM) for CO-RE relocations, which rcutrace's
/// programs do not have, and has no way to skip it (later aya versions read it lazily). It goes
/// without when the file cannot be opened, so the loader is made while no file descriptor is
/// free: the soft limit is lowered to the lowest free descriptor and restored at once. Only
/// while rcutrace has one thread (`prepare_loader`), so that nothing else is refused a file.
fn loader_without_kernel_btf() -> EbpfLoader<'static> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the struct we own.
    let have_limit = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    // The next descriptor the kernel would give out.
    let lowest_free = std::fs::File::open("/dev/null").map(|f| f.as_raw_fd());
    let lowered = match (have_limit, lowest_free) {
        (true, Ok(fd)) => {
            let none_free = libc::rlimit {
                rlim_cur: fd as libc::rlim_t,
                ..limit
            };
            // SAFETY: setrlimit reads the struct we own.
            unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &none_free) == 0 }
        }
        _ => false,
    };
    let loader = EbpfLoader::new();
    if lowered {
        // SAFETY: as above; the soft limit goes back to what it was.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    } else {
        log::info!("could not keep aya from parsing the kernel BTF");
    }
    loader
}

impl fmt::Debug for Tracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracer")
            .field("maps", &self.maps.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syscall_error(call: &'static str, errno: i32) -> anyhow::Error {
        let error = ProgramError::from(SyscallError {
            call,
            io_error: std::io::Error::from_raw_os_error(errno),
        });
        anyhow::Error::from(error).context("attaching")
    }

    #[test]
    fn a_batch_of_per_cpu_slots_sums_each_slot_by_its_key() {
        // Three slots of two CPUs, read out of order.
        let keys = [1, 0, 2];
        let values = [10, 1, 20, 2, 30, 3];
        assert_eq!(per_cpu_sums_of(&keys, &values, 2), Some(vec![22, 11, 33]));
        // A slot read twice, or one past the array, is no whole reading.
        assert_eq!(per_cpu_sums_of(&[0, 0, 2], &values, 2), None);
        assert_eq!(per_cpu_sums_of(&[0, 1, 3], &values, 2), None);
    }

    /// Only the kprobe event's own creation failing with ENOENT says the symbol is absent.
    #[test]
    fn no_such_symbol_is_told_from_other_failures() {
        assert!(kprobe_found_no_symbol(&syscall_error(
            "perf_event_open",
            libc::ENOENT
        )));
        assert!(!kprobe_found_no_symbol(&syscall_error(
            "perf_event_open",
            libc::EINVAL
        )));
        assert!(!kprobe_found_no_symbol(&syscall_error(
            "bpf_prog_load",
            libc::ENOENT
        )));
        // No kprobe event source at all (the file aya reads first is missing).
        let no_kprobes = anyhow::Error::from(std::io::Error::from_raw_os_error(libc::ENOENT))
            .context("attaching");
        assert!(!kprobe_found_no_symbol(&no_kprobes));
    }

    /// The BTF pass rules a function out only when it looked for it and did not find it.
    #[test]
    fn btf_rules_out_only_what_it_looked_for() {
        let ids = HashMap::from([("call_rcu".to_string(), 7)]);
        let targets = TrampolineTargets {
            ids: Some(Ok(ids)),
            ..TrampolineTargets::new(vec!["call_rcu", "call_rcu_hurry"])
        };
        assert!(targets.has_function("call_rcu"));
        assert!(!targets.has_function("call_rcu_hurry"));
        // Not looked for: a kprobe-only probe.
        assert!(targets.has_function("__rcu_read_lock"));
        let unread = TrampolineTargets::new(vec!["call_rcu_hurry"]);
        assert!(unread.has_function("call_rcu_hurry"));
        let failed = TrampolineTargets {
            ids: Some(Err("no BTF".into())),
            ..TrampolineTargets::new(vec!["call_rcu_hurry"])
        };
        assert!(failed.has_function("call_rcu_hurry"));
    }
}
