//! Loads rcutrace's eBPF object, attaches programs as `probes::plan` says, reads the maps, and
//! detaches. The only module that talks to aya.

use std::{collections::HashMap, fmt};

use anyhow::{Context as _, Result, anyhow, bail};
use aya::{
    Btf, Ebpf, EbpfLoader, Pod,
    maps::{Array, HashMap as BpfHashMap, Map, MapData, PerCpuArray, PerCpuHashMap},
    programs::{FEntry, FExit, KProbe, Program},
};

use rcutrace_common::latency::CONTROL_STOPPED;

use crate::{
    kernel_misses,
    probes::{AttachChoice, Method, Probe, plan},
};

/// The eBPF object built by build.rs (empty when the toolchain was missing at build time).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/rcutrace"));

/// A value for one of the eBPF side's load-time constants.
#[derive(Clone, Copy, Debug)]
pub enum Constant {
    U32(&'static str, u32),
    U64(&'static str, u64),
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
    logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
    /// Kernel ids of the programs attached, by the function and side they serve.
    program_ids: Vec<(Probe, u32)>,
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
                Constant::U64(name, value) => loader.override_global(name, value, true),
            };
        }
        let mut ebpf = loader
            .load(OBJECT)
            .context("creating the eBPF maps (is the bpf() system call allowed here?)")?;
        let logger = match aya_log::EbpfLogger::init(&mut ebpf) {
            Ok(logger) => Some(logger),
            Err(e) => {
                log::warn!("eBPF diagnostics unavailable: {e}");
                None
            }
        };
        let names: Vec<String> = ebpf.maps().map(|(name, _)| name.to_string()).collect();
        let maps = names
            .into_iter()
            .filter_map(|name| ebpf.take_map(&name).map(|map| (name, map)))
            .collect();
        Ok(Tracer {
            ebpf,
            maps,
            btf: None,
            logger,
            program_ids: Vec::new(),
        })
    }

    /// Takes the eBPF diagnostics reader, for the session to drain while tracing runs.
    pub fn take_logger(&mut self) -> Option<aya_log::EbpfLogger<&'static dyn log::Log>> {
        self.logger.take()
    }

    /// Attaches `probe` with the first planned method that works. `Failed` may still mean the
    /// function does not exist: the caller checks /proc/kallsyms only then, since producing it
    /// is slow.
    pub fn attach(&mut self, probe: &Probe, choice: AttachChoice) -> Attachment {
        let mut failures = Vec::new();
        for (method, program) in plan(probe, choice) {
            match self.attach_one(method, program, probe.function) {
                Ok(()) => {
                    log::info!("{}: attached by {method} ({program})", probe.function);
                    if let Some(id) = self.program_id(program) {
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

    fn attach_one(&mut self, method: Method, program: &str, function: &str) -> Result<()> {
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
                kprobe.attach(function, 0).context("attaching")?;
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
        Ok(())
    }

    fn program_id(&self, program: &str) -> Option<u32> {
        let info = self.ebpf.program(program)?.info();
        info.map(|info| info.id()).ok()
    }

    /// Probe hits the kernel skipped for the programs serving `probes` (see `kernel_misses`).
    pub fn missed(&self, probes: &[Probe]) -> u64 {
        let missed = kernel_misses::missed_by_program_id();
        self.program_ids
            .iter()
            .filter(|(p, _)| probes.contains(p))
            .filter_map(|(_, id)| missed.get(id))
            .sum()
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

    /// Freezes the latency and callback programs' maps (they check `CONTROL`); the counters
    /// keep counting.
    pub fn stop(&mut self) -> Result<()> {
        let Some(map) = self.maps.get_mut("CONTROL") else {
            return Ok(());
        };
        let mut control: Array<&mut MapData, u32> =
            Array::try_from(map).context("opening CONTROL")?;
        control
            .set(CONTROL_STOPPED, 1, 0)
            .context("stopping the eBPF programs")
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

    /// Every slot of a per-CPU u64 array, one vector per slot with a value per CPU.
    pub fn per_cpu_values(&self, name: &str, index: u32) -> Result<Vec<u64>> {
        let array: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.map(name)?).with_context(|| format!("opening {name}"))?;
        let values = array
            .get(&index, 0)
            .with_context(|| format!("reading {name}[{index}]"))?;
        Ok(values.iter().copied().collect())
    }

    /// All entries of a u64 -> u64 hash map.
    pub fn hash_entries(&self, name: &str) -> Result<Vec<(u64, u64)>> {
        let map: BpfHashMap<&MapData, u64, u64> =
            BpfHashMap::try_from(self.map(name)?).with_context(|| format!("opening {name}"))?;
        map.iter()
            .map(|entry| entry.with_context(|| format!("reading {name}")))
            .collect()
    }

    /// All entries of a hash map of plain-data keys and values.
    pub fn hash_entries_of<K: Pod, V: Pod>(&self, name: &str) -> Result<Vec<(K, V)>> {
        let map: BpfHashMap<&MapData, K, V> =
            BpfHashMap::try_from(self.map(name)?).with_context(|| format!("opening {name}"))?;
        map.iter()
            .map(|entry| entry.with_context(|| format!("reading {name}")))
            .collect()
    }

    /// All entries of a per-CPU hash map, one value per CPU.
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

    /// Number of keys in a u32-keyed hash map.
    pub fn hash_len(&self, name: &str) -> Result<u64> {
        let map: BpfHashMap<&MapData, u32, u64> =
            BpfHashMap::try_from(self.map(name)?).with_context(|| format!("opening {name}"))?;
        let mut len = 0;
        for key in map.keys() {
            key.with_context(|| format!("reading {name}"))?;
            len += 1;
        }
        Ok(len)
    }
}

impl fmt::Debug for Tracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracer")
            .field("maps", &self.maps.keys().collect::<Vec<_>>())
            .finish()
    }
}
