//! The running kernel's tree of `rcu_node`s, read once from its memory (/proc/kcore): how many
//! levels (`rcu_num_lvls`) and nodes (`rcu_num_nodes`) it built at boot, where each level
//! begins (`rcu_state.level[]`) and each node's `level`, `grplo`, `grphi`, `grpnum` and
//! `parent`, at offsets from the BTF. The nodes lie one after the other in
//! `rcu_state.node[]`, breadth-first, so the distance from the root to the first node of the
//! next level is one node's size. The tree never changes after boot (CPU hotplug only changes
//! which of its CPUs are online). A machine with no more CPU ids than a leaf holds (16 on
//! Debian) has one node, the root, at `rcu_state.node[0]`: no memory needs reading for it.

use anyhow::{Context as _, Result, bail, ensure};

use super::{btf, kcore::KernelMemory};
use crate::model::tree::{Node, RcuTree};

const STATE_LEVEL: btf::Field = ("rcu_state", "level");
const STATE_NODE: btf::Field = ("rcu_state", "node");
/// Also read by the grace-period programs (`rcu_state::layout`).
pub(super) const NODE_LEVEL: btf::Field = ("rcu_node", "level");
pub(super) const NODE_GRPLO: btf::Field = ("rcu_node", "grplo");
const NODE_GRPHI: btf::Field = ("rcu_node", "grphi");
const NODE_GRPNUM: btf::Field = ("rcu_node", "grpnum");
const NODE_PARENT: btf::Field = ("rcu_node", "parent");

/// The fields read, for the run's one pass over the BTF (`rcu_state::fields`).
pub const FIELDS: [btf::Field; 7] = [
    STATE_LEVEL,
    STATE_NODE,
    NODE_LEVEL,
    NODE_GRPLO,
    NODE_GRPHI,
    NODE_GRPNUM,
    NODE_PARENT,
];

/// Leaves' size, the kernel's `rcu_fanout_leaf` (a boot parameter).
const FANOUT_LEAF: &str = "/sys/module/rcutree/parameters/rcu_fanout_leaf";

/// What `read` needs from kallsyms beside `rcu_state`'s address.
pub enum Lookup {
    /// Nothing: the machine's `cpus` CPU ids fit in one leaf, so the tree is its root alone.
    OneLeaf { cpus: u32 },
    /// The addresses kallsyms gave for `VARIABLES`, looked up with `rcu_state`'s (the
    /// start's one symbol lookup).
    Tree([Option<u64>; 2]),
}

/// Whether this machine's CPU ids all fit in one leaf (then its tree needs no read): the
/// possible CPU ids if so, `None` for a larger machine or where the leaves' size cannot be
/// read.
pub fn one_leaf() -> Result<Option<u32>> {
    let cpus = super::possible_cpus()?;
    let fanout_leaf = std::fs::read_to_string(FANOUT_LEAF)
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok());
    Ok(fanout_leaf
        .is_some_and(|leaf| fits_one_leaf(cpus, leaf))
        .then_some(cpus))
}

/// `rcu_init_geometry()`'s first level: CPU ids `0..cpus` fit in one leaf of `fanout_leaf`.
fn fits_one_leaf(cpus: u32, fanout_leaf: u32) -> bool {
    (1..=fanout_leaf).contains(&cpus)
}

/// The tree of one node, the root at `root`, over CPU ids `0..cpus`.
fn root_only(root: u64, cpus: u32) -> Option<RcuTree> {
    RcuTree::new(vec![Node {
        address: root,
        level: 0,
        grplo: 0,
        grphi: cpus.checked_sub(1)?,
        grpnum: 0,
        parent: None,
    }])
}

/// More levels than any kernel builds (`MAX_RCU_LVLS` is 4).
const MAX_LEVELS: u32 = 4;
/// More nodes than any kernel builds (8,192 CPUs make 513 with Debian's fanouts).
const MAX_NODES: u32 = 1 << 16;

/// The variables whose addresses a tree of more than one node needs from kallsyms.
pub const VARIABLES: [&str; 2] = ["rcu_num_lvls", "rcu_num_nodes"];

/// Reads the tree of the kernel whose `rcu_state` is at `rcu_state`; fails saying what it
/// could not read.
pub fn read(rcu_state: u64, lookup: Lookup) -> Result<RcuTree> {
    let offsets =
        btf::field_offsets(&FIELDS).context("reading rcu_node's layout from the kernel BTF")?;
    let offset = |field: btf::Field| {
        offsets
            .get(&field)
            .map(|&o| u64::from(o))
            .with_context(|| format!("this kernel's BTF has no {}.{}", field.0, field.1))
    };
    let variables = match lookup {
        Lookup::OneLeaf { cpus } => {
            return root_only(rcu_state + offset(STATE_NODE)?, cpus).context("a machine of no CPU");
        }
        Lookup::Tree(variables) => variables,
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
        "kallsyms gives no address for rcu_num_lvls and rcu_num_nodes (the kernel \
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ids_that_fit_in_one_leaf_make_one_node() {
        assert!(fits_one_leaf(16, 16));
        let tree = root_only(0xffff_ffff_8300_0000, 16).unwrap();
        assert_eq!(tree.levels(), 1);
        assert_eq!(tree.leaf_cpu_lists(), ["0-15"]);
        assert_eq!(
            tree,
            crate::model::tree::RcuTree::modelled(16, 16, 64),
            "the kernel's own geometry for 16 CPUs"
        );
        // 17 CPU ids, or leaves of 2 on 4 CPUs, make a tree: read from kernel memory.
        assert!(!fits_one_leaf(17, 16));
        assert!(!fits_one_leaf(4, 2));
        assert!(!fits_one_leaf(0, 16));
        assert_eq!(root_only(0xffff_ffff_8300_0000, 0), None);
    }
}
