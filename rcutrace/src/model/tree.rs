//! The kernel's tree of `rcu_node`s, and the one decoder of a quiescent-state report.
//!
//! Tree RCU keeps its grace-period state in a tree: leaves of up to `rcu_fanout_leaf` CPUs
//! (16 on Debian) under inner nodes of up to `RCU_FANOUT` children (64), one level more past
//! each multiple. A report (`rcu_report_qs_rnp(mask, rnp, ...)`) names bits of one node's
//! `qsmask`: at a leaf each bit is a CPU (`grplo + bit`); at an inner node each bit is a child
//! (the child whose `grpnum` is that bit), which happens when a leaf's last blocked reader
//! leaves its critical section and the leaf reports itself to its parent. Reading an inner
//! node's bits as CPUs blames CPU 2 for a reader that blocked on CPU 40.
//!
//! The geometry is the kernel's own (read at start-up, `kernel::rcu_state`); `modelled` builds
//! the same shape the way the kernel's `rcu_init_geometry()` does, for tests of layouts no
//! guest here boots (three levels need more than 1,024 CPUs).

use std::fmt::Write as _;

/// One `rcu_node` as the kernel set it up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    /// Its address in kernel memory: what a report's probe sees.
    pub address: u64,
    /// 0 at the root.
    pub level: u32,
    /// The CPUs under it: `grplo..=grphi`.
    pub grplo: u32,
    pub grphi: u32,
    /// Its bit in its parent's masks.
    pub grpnum: u32,
    /// The parent's address; `None` at the root.
    pub parent: Option<u64>,
}

/// The tree, breadth-first as the kernel lays it out (`rcu_state.node[]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RcuTree {
    nodes: Vec<Node>,
    levels: u32,
}

/// What a report's bits stand for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reported {
    /// A leaf's bits: these CPUs reported their quiescent states.
    Cpus(Vec<u32>),
    /// An inner node's bits: these children (each with every CPU under it) are done, which
    /// happens when a leaf's last blocked reader left its critical section. The CPUs had all
    /// reported before.
    Children(Vec<u32>),
}

impl Reported {
    /// The CPUs the report covers, ascending.
    #[cfg(test)]
    pub fn cpus(&self) -> &[u32] {
        match self {
            Reported::Cpus(cpus) | Reported::Children(cpus) => cpus,
        }
    }
}

impl RcuTree {
    /// A tree from the kernel's nodes; `None` when they do not make one (no root, a parent
    /// that is not a node of the level above, a level without nodes).
    pub fn new(nodes: Vec<Node>) -> Option<RcuTree> {
        let levels = nodes.iter().map(|n| n.level).max()? + 1;
        let roots = nodes.iter().filter(|n| n.parent.is_none()).count();
        let well_formed = roots == 1
            && (0..levels).all(|level| nodes.iter().any(|n| n.level == level))
            && nodes.iter().all(|node| match node.parent {
                None => node.level == 0,
                Some(parent) => nodes
                    .iter()
                    .any(|p| p.address == parent && p.level + 1 == node.level),
            })
            && nodes.iter().all(|n| n.grplo <= n.grphi && n.grpnum < 64);
        well_formed.then_some(RcuTree { nodes, levels })
    }

    /// The tree the kernel builds for `cpus` CPU ids (`nr_cpu_ids`) with leaves of
    /// `fanout_leaf` CPUs and inner nodes of `fanout` children (`rcu_init_geometry()` and
    /// `rcu_init_one()`, without `rcu_fanout_exact`), at made-up addresses. Inner nodes'
    /// spreads are balanced as the kernel balances them: 20 CPUs under a leaf size of 16 make
    /// two leaves of 10.
    pub fn modelled(cpus: u32, fanout_leaf: u32, fanout: u32) -> RcuTree {
        const BASE: u64 = 0xffff_ffff_8300_0000;
        const NODE_SIZE: u64 = 0x200;
        let cpus = cpus.max(1);
        let mut capacity = vec![u64::from(fanout_leaf.max(1))];
        while u64::from(cpus) > *capacity.last().unwrap() {
            let next = capacity.last().unwrap() * u64::from(fanout.max(2));
            capacity.push(next);
        }
        let levels = capacity.len();
        // Nodes per level, root first.
        let counts: Vec<u64> = (0..levels)
            .map(|i| u64::from(cpus).div_ceil(capacity[levels - 1 - i]))
            .collect();
        let mut spread = vec![0u64; levels];
        let mut previous = u64::from(cpus);
        for i in (0..levels).rev() {
            spread[i] = previous.div_ceil(counts[i]);
            previous = counts[i];
        }
        let first_of_level: Vec<u64> = (0..levels)
            .map(|i| counts[..i].iter().sum::<u64>())
            .collect();
        let address = |level: usize, j: u64| BASE + (first_of_level[level] + j) * NODE_SIZE;
        let mut nodes = Vec::new();
        let mut stride = 1u64;
        let mut by_level = vec![Vec::new(); levels];
        for i in (0..levels).rev() {
            stride *= spread[i];
            for j in 0..counts[i] {
                let grplo = j * stride;
                let grphi = ((j + 1) * stride - 1).min(u64::from(cpus) - 1);
                let (grpnum, parent) = if i == 0 {
                    (0, None)
                } else {
                    (j % spread[i - 1], Some(address(i - 1, j / spread[i - 1])))
                };
                by_level[i].push(Node {
                    address: address(i, j),
                    level: i as u32,
                    grplo: grplo as u32,
                    grphi: grphi as u32,
                    grpnum: grpnum as u32,
                    parent,
                });
            }
        }
        for level in by_level {
            nodes.extend(level);
        }
        RcuTree {
            nodes,
            levels: levels as u32,
        }
    }

    /// The level of the leaves (0 when the root is the only node).
    pub fn leaf_level(&self) -> u32 {
        self.levels - 1
    }

    pub fn levels(&self) -> u32 {
        self.levels
    }

    #[cfg(test)]
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn leaves(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.level == self.leaf_level())
    }

    /// Each leaf's CPUs as a cpulist, in the kernel's order.
    pub fn leaf_cpu_lists(&self) -> Vec<String> {
        self.leaves()
            .map(|leaf| cpu_list(&(leaf.grplo..=leaf.grphi).collect::<Vec<_>>()))
            .collect()
    }

    pub fn node(&self, address: u64) -> Option<&Node> {
        self.nodes.iter().find(|n| n.address == address)
    }

    /// What the bits `mask` of the node at `address` stand for; `None` for an address that
    /// is no node of the tree, or a bit that is no child of an inner node.
    pub fn decode(&self, address: u64, mask: u64) -> Option<Reported> {
        let node = self.node(address)?;
        let bits = (0..64u32).filter(|bit| mask & (1 << bit) != 0);
        if node.level == self.leaf_level() {
            let cpus: Option<Vec<u32>> = bits
                .map(|bit| Some(node.grplo + bit).filter(|cpu| *cpu <= node.grphi))
                .collect();
            return cpus.map(Reported::Cpus);
        }
        let mut cpus = Vec::new();
        for bit in bits {
            let child = self
                .nodes
                .iter()
                .find(|c| c.parent == Some(address) && c.grpnum == bit)?;
            cpus.extend(child.grplo..=child.grphi);
        }
        cpus.sort_unstable();
        Some(Reported::Children(cpus))
    }
}

/// CPUs as the kernel's cpulist format writes them (`/sys/devices/system/cpu/online`):
/// ascending runs, `0-3,8,10-11`.
pub fn cpu_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut text = String::new();
    let mut at = 0;
    while at < sorted.len() {
        let start = sorted[at];
        let mut end = start;
        while at + 1 < sorted.len() && sorted[at + 1] == end + 1 {
            at += 1;
            end = sorted[at];
        }
        if !text.is_empty() {
            text.push(',');
        }
        if start == end {
            let _ = write!(text, "{start}");
        } else {
            let _ = write!(text, "{start}-{end}");
        }
        at += 1;
    }
    text
}

/// The CPUs of a cpulist (`0-3,8`, as sysfs writes them, with or without the line's end);
/// `None` for anything else.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((start, end)) => {
                let (start, end): (u32, u32) = (start.parse().ok()?, end.parse().ok()?);
                if start > end || end - start >= 1 << 16 {
                    return None;
                }
                cpus.extend(start..=end);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_at(tree: &RcuTree, level: u32, index: usize) -> Node {
        *tree
            .nodes()
            .iter()
            .filter(|n| n.level == level)
            .nth(index)
            .unwrap()
    }

    #[test]
    fn one_level_the_root_is_the_leaf() {
        let tree = RcuTree::modelled(2, 16, 64);
        assert_eq!(tree.levels(), 1);
        let root = node_at(&tree, 0, 0);
        assert_eq!((root.grplo, root.grphi, root.parent), (0, 1, None));
        assert_eq!(
            tree.decode(root.address, 0b10),
            Some(Reported::Cpus(vec![1]))
        );
        assert_eq!(
            tree.decode(root.address, 0b11),
            Some(Reported::Cpus(vec![0, 1]))
        );
        // A bit past the node's CPUs is no CPU.
        assert_eq!(tree.decode(root.address, 0b100), None);
    }

    #[test]
    fn two_levels_of_64_cpus_an_inner_bit_is_a_leaf_of_16() {
        let tree = RcuTree::modelled(64, 16, 64);
        assert_eq!((tree.levels(), tree.leaf_level()), (2, 1));
        assert_eq!(tree.leaf_cpu_lists(), ["0-15", "16-31", "32-47", "48-63"]);
        let root = node_at(&tree, 0, 0);
        let leaf = node_at(&tree, 1, 2);
        assert_eq!((leaf.grplo, leaf.grphi, leaf.grpnum), (32, 47, 2));
        assert_eq!(leaf.parent, Some(root.address));
        // CPU 40 reports at its leaf: bit 8 of leaf 2.
        assert_eq!(
            tree.decode(leaf.address, 1 << 8),
            Some(Reported::Cpus(vec![40]))
        );
        // Leaf 2's last blocked reader left: bit 2 of the root is CPUs 32-47, never CPU 2.
        let reported = tree.decode(root.address, 1 << 2).unwrap();
        assert_eq!(reported, Reported::Children((32..=47).collect()));
        assert_eq!(cpu_list(reported.cpus()), "32-47");
        // A force-quiescent-state pass finding the whole last leaf idle.
        let last = node_at(&tree, 1, 3);
        assert_eq!(
            cpu_list(tree.decode(last.address, 0xffff).unwrap().cpus()),
            "48-63"
        );
    }

    #[test]
    fn four_cpus_with_leaves_of_two() {
        // rcutree.rcu_fanout_leaf=2 on 4 CPUs: two leaves under a root.
        let tree = RcuTree::modelled(4, 2, 64);
        assert_eq!(tree.levels(), 2);
        let root = node_at(&tree, 0, 0);
        let second = node_at(&tree, 1, 1);
        assert_eq!((second.grplo, second.grphi, second.grpnum), (2, 3, 1));
        // CPU 3 reports at its leaf as bit 1; the same bit at the root is the second leaf.
        assert_eq!(
            tree.decode(second.address, 0b10),
            Some(Reported::Cpus(vec![3]))
        );
        assert_eq!(
            tree.decode(root.address, 0b10),
            Some(Reported::Children(vec![2, 3]))
        );
    }

    #[test]
    fn balanced_spreads_as_the_kernel_makes_them() {
        // 20 CPUs with leaves of up to 16: two leaves of 10, not 16 and 4.
        let tree = RcuTree::modelled(20, 16, 64);
        let spans: Vec<(u32, u32)> = tree.leaves().map(|n| (n.grplo, n.grphi)).collect();
        assert_eq!(spans, vec![(0, 9), (10, 19)]);
        // 384 CPUs: 24 leaves of 16.
        let tree = RcuTree::modelled(384, 16, 64);
        assert_eq!(tree.leaves().count(), 24);
        let root = node_at(&tree, 0, 0);
        assert_eq!(
            tree.decode(root.address, 1 << 23).unwrap().cpus(),
            (368..384).collect::<Vec<_>>()
        );
    }

    #[test]
    fn three_levels_past_1024_cpus() {
        // 2,048 CPUs: 128 leaves of 16 under 2 inner nodes of 64 leaves under the root.
        let tree = RcuTree::modelled(2048, 16, 64);
        assert_eq!(tree.levels(), 3);
        assert_eq!(tree.leaves().count(), 128);
        let root = node_at(&tree, 0, 0);
        let inner = node_at(&tree, 1, 1);
        assert_eq!((inner.grplo, inner.grphi, inner.grpnum), (1024, 2047, 1));
        assert_eq!(inner.parent, Some(root.address));
        // The root's bit 1: every CPU of the second inner node.
        assert_eq!(
            cpu_list(tree.decode(root.address, 0b10).unwrap().cpus()),
            "1024-2047"
        );
        // The inner node's bit 5: its sixth leaf, CPUs 1104-1119.
        assert_eq!(
            tree.decode(inner.address, 1 << 5),
            Some(Reported::Children((1104..=1119).collect()))
        );
        // A leaf's bits under it are CPUs.
        let leaf = node_at(&tree, 2, 69);
        assert_eq!((leaf.grplo, leaf.grpnum), (1104, 5));
        assert_eq!(leaf.parent, Some(inner.address));
        assert_eq!(
            tree.decode(leaf.address, 0b1001),
            Some(Reported::Cpus(vec![1104, 1107]))
        );
    }

    #[test]
    fn an_address_that_is_no_node_decodes_to_nothing() {
        let tree = RcuTree::modelled(64, 16, 64);
        assert_eq!(tree.decode(0x1234, 1), None);
        // Bit 7 of the root: it has only 4 children.
        let root = node_at(&tree, 0, 0);
        assert_eq!(tree.decode(root.address, 1 << 7), None);
    }

    #[test]
    fn a_tree_is_checked_when_read() {
        let tree = RcuTree::modelled(64, 16, 64);
        assert_eq!(RcuTree::new(tree.nodes().to_vec()).as_ref(), Some(&tree));
        let mut orphan = tree.nodes().to_vec();
        orphan[3].parent = Some(0xdead);
        assert_eq!(RcuTree::new(orphan), None);
        assert_eq!(RcuTree::new(Vec::new()), None);
    }

    #[test]
    fn cpu_lists_in_the_kernels_format() {
        assert_eq!(cpu_list(&[]), "");
        assert_eq!(cpu_list(&[3]), "3");
        assert_eq!(cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpu_list(&[11, 10, 10, 0]), "0,10-11");
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }
}
