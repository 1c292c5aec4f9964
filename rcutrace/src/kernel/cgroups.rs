//! cgroup v2 ids (what `bpf_get_current_cgroup_id()` returns) as paths below the cgroup2
//! mount (`/system.slice/foo.service`).
//!
//! A cgroup's id is the inode number of its directory in cgroupfs, so one walk of the mount
//! names every cgroup that exists. Ids are never reused, so an id the walk does not find
//! belongs to a cgroup already removed, and stays unknown: each id costs at most one walk,
//! never one per event.

use std::{collections::HashMap, fs, os::unix::fs::MetadataExt as _, path::PathBuf};

/// Names cgroup ids, walking the cgroup2 mount when an id is not known yet.
#[derive(Debug, Default)]
pub struct CgroupPaths {
    /// The cgroup2 mount point; `None` when none is mounted (or not looked up yet).
    mount: Option<PathBuf>,
    looked_up: bool,
    /// Every id seen in a walk, or asked for and not found (`None`).
    known: HashMap<u64, Option<String>>,
}

impl CgroupPaths {
    pub fn new() -> Self {
        Self::default()
    }

    /// Paths below `mount` (`new` finds the mount in /proc/self/mountinfo).
    #[cfg(test)]
    pub fn below(mount: &std::path::Path) -> Self {
        CgroupPaths {
            mount: Some(mount.to_path_buf()),
            looked_up: true,
            known: HashMap::new(),
        }
    }

    /// The path of cgroup `id` (`/` for the root), or a bracketed note of why it has none.
    pub fn path(&mut self, id: u64) -> String {
        if !self.known.contains_key(&id) {
            self.walk();
            self.known.entry(id).or_insert(None);
        }
        match (&self.known[&id], &self.mount) {
            (Some(path), _) => path.clone(),
            (None, Some(_)) => format!("[cgroup {id}, removed]"),
            (None, None) => format!("[cgroup {id}]"),
        }
    }

    /// Records every cgroup below the mount by its id.
    fn walk(&mut self) {
        if !self.looked_up {
            self.looked_up = true;
            self.mount = fs::read_to_string("/proc/self/mountinfo")
                .ok()
                .and_then(|text| cgroup2_mount(&text));
            if self.mount.is_none() {
                eprintln!(
                    "rcutrace: warning: no cgroup2 file system is mounted: cgroups are shown \
                     by their ids"
                );
            }
        }
        let Some(mount) = self.mount.clone() else {
            return;
        };
        let mut pending = vec![(mount, String::from("/"))];
        while let Some((dir, path)) = pending.pop() {
            // A cgroup removed during the walk is simply not found.
            let Ok(meta) = fs::metadata(&dir) else {
                continue;
            };
            self.known.insert(meta.ino(), Some(path.clone()));
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    let child = if path == "/" {
                        format!("/{name}")
                    } else {
                        format!("{path}/{name}")
                    };
                    pending.push((entry.path(), child));
                }
            }
        }
    }
}

/// The mount point of the first cgroup2 file system in a mountinfo text.
fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        // ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let mount_point = left.split_whitespace().nth(4)?;
        Some(PathBuf::from(unescape_octal(mount_point)))
    })
}

/// Mountinfo writes space, tab, newline and backslash as `\040`-style octal escapes.
fn unescape_octal(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match escape {
            Some(digits) => {
                let value = digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
                out.push(value as u8);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_cgroup2_mount_is_found_in_mountinfo() {
        let mountinfo = "\
22 28 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
26 23 0:23 / /sys/fs/cgroup/unified rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate
27 23 0:24 / /sys/fs/cgroup/systemd rw shared:5 - cgroup cgroup rw,name=systemd
";
        assert_eq!(
            cgroup2_mount(mountinfo),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let spaced = "30 23 0:25 / /mnt/my\\040cgroups rw - cgroup2 none rw\n";
        assert_eq!(
            cgroup2_mount(spaced),
            Some(PathBuf::from("/mnt/my cgroups"))
        );
        assert_eq!(
            cgroup2_mount("22 28 0:21 / /proc rw - proc proc rw\n"),
            None
        );
    }

    /// Directories stand in for cgroups: a cgroup's id is its directory's inode number.
    #[test]
    fn ids_are_named_by_their_directories_below_the_mount() {
        let root = std::env::temp_dir().join(format!("rcutrace-cgroups-{}", std::process::id()));
        let service = root.join("system.slice/foo.service");
        fs::create_dir_all(&service).unwrap();
        fs::create_dir_all(root.join("user.slice")).unwrap();
        let ino = |p: &Path| fs::metadata(p).unwrap().ino();
        let mut paths = CgroupPaths::below(&root);
        assert_eq!(paths.path(ino(&root)), "/");
        assert_eq!(paths.path(ino(&service)), "/system.slice/foo.service");
        assert_eq!(paths.path(ino(&root.join("user.slice"))), "/user.slice");
        // Made after the first walk: a new id walks again and finds it.
        let later = root.join("later");
        fs::create_dir(&later).unwrap();
        assert_eq!(paths.path(ino(&later)), "/later");
        // Removed before it was named: said so.
        let gone = root.join("gone");
        fs::create_dir(&gone).unwrap();
        let gone_id = ino(&gone);
        fs::remove_dir(&gone).unwrap();
        let mut fresh = CgroupPaths::below(&root);
        assert_eq!(fresh.path(gone_id), format!("[cgroup {gone_id}, removed]"));
        fs::remove_dir_all(&root).unwrap();
    }
}
