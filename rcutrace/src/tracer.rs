//! Loads rcutrace's eBPF object, attaches programs as `probes::plan` says, reads the maps, and
//! detaches. The only module that talks to aya.

use std::{collections::HashMap, fmt};

use anyhow::{Context as _, Result, anyhow, bail};
use aya::{
    Btf, Ebpf, EbpfLoader, Pod,
    maps::{Array, HashMap as BpfHashMap, Map, MapData, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::{FEntry, FExit, KProbe, Program, kprobe::KProbeLinkId},
};

use rcutrace_common::{
    attribution::{Attribution, StackFrames},
    latency::{CONTROL_RUNNING, TASKS_RCU_KTHREADS},
};

use crate::probes::{AttachChoice, Keys, Method, Probe, plan};

/// The eBPF object built by build.rs (empty when the toolchain was missing at build time).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/rcutrace"));

/// A value for one of the eBPF side's load-time constants.
#[derive(Clone, Copy, Debug)]
pub enum Constant {
    U32(&'static str, u32),
    /// The tasks-RCU kthreads' pids (`TASKS_RCU_PIDS`).
    TasksRcuPids([u32; TASKS_RCU_KTHREADS]),
    /// The number of entries of a map: large maps are declared with one entry, so that only
    /// the command that uses one pays for its memory.
    MaxEntries(&'static str, u32),
}

/// How one probe ended up.
#[derive(Debug)]
pub enum Attachment {
    Attached(Method),
    /// The function is not in /proc/kallsyms on this kernel (absent or inlined).
    Missing,
    /// Every planned method failed; what the kernel said to each.
    Failed(Vec<(Method, String)>),
}

pub struct Tracer {
    /// Dropping the object detaches and unloads every program; the maps stay readable.
    ebpf: Ebpf,
    maps: HashMap<String, Map>,
    btf: Option<std::result::Result<Btf, String>>,
    /// Kernel ids of the programs attached, by the function and side they serve.
    program_ids: Vec<(Probe, u32)>,
    /// The kprobe links, for probes switched on and off during the window
    /// (`--sample-readers`).
    kprobes: Vec<KprobeLink>,
}

struct KprobeLink {
    probe: Probe,
    program: String,
    /// `None` while detached.
    link: Option<KProbeLinkId>,
}

impl Tracer {
    /// Creates the maps and sets the load-time constants; no program is loaded yet.
    pub fn load(constants: &[Constant]) -> Result<Self> {
        if OBJECT.is_empty() {
            bail!(
                "this rcutrace binary was built without its eBPF programs (the eBPF toolchain \
                 was missing when it was compiled); run scripts/setup, then rebuild"
            );
        }
        let mut loader = EbpfLoader::new();
        // The programs need no CO-RE relocations: free the kernel BTF the loader parsed (it is
        // large); fentry/fexit parse it again only if they are tried.
        loader.btf(None);
        for constant in constants {
            match constant {
                Constant::U32(name, value) => loader.override_global(name, value, true),
                Constant::TasksRcuPids(pids) => {
                    loader.override_global("TASKS_RCU_PIDS", pids, true)
                }
                Constant::MaxEntries(name, entries) => loader.map_max_entries(name, *entries),
            };
        }
        let mut ebpf = loader
            .load(OBJECT)
            .context("creating the eBPF maps (is the bpf() system call allowed here?)")?;
        let names: Vec<String> = ebpf.maps().map(|(name, _)| name.to_string()).collect();
        let maps = names
            .into_iter()
            .filter_map(|name| ebpf.take_map(&name).map(|map| (name, map)))
            .collect();
        Ok(Tracer {
            ebpf,
            maps,
            btf: None,
            program_ids: Vec::new(),
            kprobes: Vec::new(),
        })
    }

    /// Attaches `probe` with the first planned method that works. `Failed` may still mean the
    /// function does not exist: the caller checks /proc/kallsyms only then, since producing it
    /// is slow.
    pub fn attach(&mut self, probe: &Probe, choice: AttachChoice, keys: Keys) -> Attachment {
        let mut failures = Vec::new();
        for (method, program) in plan(probe, choice, keys) {
            match self.attach_one(method, &program, probe.function) {
                Ok(link) => {
                    if let Some(link) = link {
                        self.kprobes.push(KprobeLink {
                            probe: *probe,
                            program: program.clone(),
                            link: Some(link),
                        });
                    }
                    log::info!("{}: attached by {method} ({program})", probe.function);
                    if let Some(id) = self.program_id(&program) {
                        self.program_ids.push((*probe, id));
                    }
                    return Attachment::Attached(method);
                }
                Err(e) => {
                    log::info!("{}: {method} failed: {e:#}", probe.function);
                    failures.push((method, format!("{e:#}")));
                }
            }
        }
        Attachment::Failed(failures)
    }

    /// Attaches `program` to `function`; a kprobe's link is returned, for switching it.
    fn attach_one(
        &mut self,
        method: Method,
        program: &str,
        function: &str,
    ) -> Result<Option<KProbeLinkId>> {
        let trampoline = matches!(method, Method::Fentry | Method::Fexit);
        if trampoline {
            self.read_kernel_btf()?;
        }
        let btf = self.btf.as_ref().and_then(|btf| btf.as_ref().ok());
        let program: &mut Program = self
            .ebpf
            .program_mut(program)
            .ok_or_else(|| anyhow!("program {program} missing from the eBPF object"))?;
        match (method, btf) {
            (Method::Kprobe | Method::Kretprobe, _) => {
                let kprobe: &mut KProbe = program.try_into()?;
                kprobe.load().context("loading the program")?;
                return Ok(Some(kprobe.attach(function, 0).context("attaching")?));
            }
            (Method::Fentry, Some(btf)) => {
                let fentry: &mut FEntry = program.try_into()?;
                fentry.load(function, btf).context("loading the program")?;
                fentry.attach().context("attaching")?;
            }
            (Method::Fexit, Some(btf)) => {
                let fexit: &mut FExit = program.try_into()?;
                fexit.load(function, btf).context("loading the program")?;
                fexit.attach().context("attaching")?;
            }
            (Method::Fentry | Method::Fexit, None) => bail!("kernel BTF unavailable"),
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

    fn program_id(&self, program: &str) -> Option<u32> {
        let info = self.ebpf.program(program)?.info();
        info.map(|info| info.id()).ok()
    }

    /// Kernel ids of the programs serving `probes` (their skipped hits are counted by id).
    pub fn program_ids<'a>(&'a self, probes: &'a [Probe]) -> impl Iterator<Item = u32> + 'a {
        self.program_ids
            .iter()
            .filter(|(p, _)| probes.contains(p))
            .map(|(_, id)| *id)
    }

    /// Reads the kernel's BTF once; fentry/fexit need it to find the function's type.
    fn read_kernel_btf(&mut self) -> Result<()> {
        let btf = self.btf.get_or_insert_with(|| {
            Btf::from_sys_fs().map_err(|e| {
                format!(
                    "{:#}",
                    anyhow!(e).context("reading kernel BTF (/sys/kernel/btf/vmlinux)")
                )
            })
        });
        btf.as_ref().map(|_| ()).map_err(|e| anyhow!(e.clone()))
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

    /// Every slot of a per-CPU u64 array, summed over the CPUs.
    pub fn per_cpu_sums(&self, name: &str) -> Result<Vec<u64>> {
        let array: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.map(name)?).with_context(|| format!("opening {name}"))?;
        (0..array.len())
            .map(|index| {
                let values = array
                    .get(&index, 0)
                    .with_context(|| format!("reading {name}[{index}]"))?;
                Ok(values.iter().fold(0u64, |sum, v| sum.wrapping_add(*v)))
            })
            .collect()
    }

    /// One slot of a per-CPU u64 array, summed over the CPUs.
    pub fn counter(&self, name: &str, index: u32) -> Result<u64> {
        let values = self.per_cpu_values(name, index)?;
        Ok(values.iter().fold(0u64, |sum, v| sum.wrapping_add(*v)))
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

    /// The calls still in flight: `(thread id, timed function index)`.
    pub fn in_flight(&self) -> Result<Vec<(u32, u32)>> {
        use rcutrace_common::latency::{InFlight, InFlightKey};
        let map: BpfHashMap<&MapData, InFlightKey, InFlight> =
            BpfHashMap::try_from(self.map("IN_FLIGHT")?).context("opening IN_FLIGHT")?;
        map.keys()
            .map(|key| key.map(|k| (k.tid, k.timed)).context("reading IN_FLIGHT"))
            .collect()
    }
}

impl fmt::Debug for Tracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracer")
            .field("maps", &self.maps.keys().collect::<Vec<_>>())
            .finish()
    }
}
