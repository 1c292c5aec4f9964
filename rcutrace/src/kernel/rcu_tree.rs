//! The running kernel's tree of `rcu_node`s, read once from its memory (/proc/kcore): how many
//! levels (`rcu_num_lvls`) and nodes (`rcu_num_nodes`) it built at boot, where each level
//! begins (`rcu_state.level[]`) and each node's `level`, `grplo`, `grphi`, `grpnum` and
//! `parent`, at offsets from the BTF. The nodes lie one after the other in
//! `rcu_state.node[]`, breadth-first, so the distance from the root to the first node of the
//! next level is one node's size. The tree never changes after boot (CPU hotplug only changes
//! which of its CPUs are online).

use anyhow::{Context as _, Result, bail, ensure};

use super::{btf, kcore::KernelMemory};
use crate::model::tree::{Node, RcuTree};

const STATE_LEVEL: btf::Field = ("rcu_state", "level");
const NODE_LEVEL: btf::Field = ("rcu_node", "level");
const NODE_GRPLO: btf::Field = ("rcu_node", "grplo");
const NODE_GRPHI: btf::Field = ("rcu_node", "grphi");
const NODE_GRPNUM: btf::Field = ("rcu_node", "grpnum");
const NODE_PARENT: btf::Field = ("rcu_node", "parent");

/// The fields read, for the run's one pass over the BTF (`rcu_state::fields`).
pub const FIELDS: [btf::Field; 6] = [
    STATE_LEVEL,
    NODE_LEVEL,
    NODE_GRPLO,
    NODE_GRPHI,
    NODE_GRPNUM,
    NODE_PARENT,
];

/// More levels than any kernel builds (`MAX_RCU_LVLS` is 4).
const MAX_LEVELS: u32 = 4;
/// More nodes than any kernel builds (8,192 CPUs make 513 with Debian's fanouts).
const MAX_NODES: u32 = 1 << 16;

/// The variables whose addresses `read` needs from /proc/kallsyms: looked up by the caller in
/// the same pass as `rcu_state`'s, since each pass reads most of that file (hundreds of
/// milliseconds in a small VM).
pub const VARIABLES: [&str; 2] = ["rcu_num_lvls", "rcu_num_nodes"];

/// Reads the tree of the kernel whose `rcu_state` is at `rcu_state`, given the addresses
/// /proc/kallsyms gave for `VARIABLES`; fails saying what it could not read.
pub fn read(rcu_state: u64, variables: [Option<u64>; 2]) -> Result<RcuTree> {
    let offsets =
        btf::field_offsets(&FIELDS).context("reading rcu_node's layout from the kernel BTF")?;
    let offset = |field: btf::Field| {
        offsets
            .get(&field)
            .map(|&o| u64::from(o))
            .with_context(|| format!("this kernel's BTF has no {}.{}", field.0, field.1))
    };
    let state_level = offset(STATE_LEVEL)?;
    let [level, grplo, grphi, grpnum, parent] = [
        offset(NODE_LEVEL)?,
        offset(NODE_GRPLO)?,
        offset(NODE_GRPHI)?,
        offset(NODE_GRPNUM)?,
        offset(NODE_PARENT)?,
    ];
    let [levels, nodes] = variables;
    let (levels, nodes) = levels.zip(nodes).context(
        "/proc/kallsyms gives no address for rcu_num_lvls and rcu_num_nodes (the kernel \
         lacks CONFIG_KALLSYMS_ALL, or kernel.kptr_restrict hides addresses)",
    )?;
    let memory = KernelMemory::open().context("reading the rcu_node tree")?;
    let levels = memory.read_u32(levels)?;
    let count = memory.read_u32(nodes)?;
    ensure!(
        (1..=MAX_LEVELS).contains(&levels) && (1..=MAX_NODES).contains(&count),
        "the kernel says its rcu_node tree has {levels} levels and {count} nodes"
    );
    let root = memory.read_u64(rcu_state + state_level)?;
    let size = if levels > 1 {
        memory
            .read_u64(rcu_state + state_level + 8)?
            .wrapping_sub(root)
    } else {
        0
    };
    ensure!(
        levels == 1 || (1..=1 << 16).contains(&size),
        "rcu_state.level[1] is {size:#x} bytes past level[0]: not one rcu_node further"
    );
    let nodes = (0..u64::from(count))
        .map(|i| {
            let address = root + i * size;
            // grplo and grphi are ints, grpnum and level bytes.
            let word = |field: u64| memory.read_u32(address + field);
            let byte = |field: u64| memory.read_u8(address + field).map(u32::from);
            let parent = memory.read_u64(address + parent)?;
            Ok(Node {
                address,
                level: byte(level)?,
                grplo: word(grplo)?,
                grphi: word(grphi)?,
                grpnum: byte(grpnum)?,
                parent: (parent != 0).then_some(parent),
            })
        })
        .collect::<Result<Vec<Node>>>()?;
    match RcuTree::new(nodes.clone()) {
        Some(tree) if tree.levels() == levels => Ok(tree),
        _ => bail!("the rcu_node tree read from kernel memory is not a tree: {nodes:x?}"),
    }
}
