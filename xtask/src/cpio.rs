//! A minimal writer for the "newc" cpio format the kernel unpacks as an initramfs.

use std::collections::BTreeMap;
use std::io::{self, Write};

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir,
    File { data: Vec<u8>, mode: u32 },
    Symlink(String),
    CharDev { major: u32, minor: u32, mode: u32 },
}

/// An in-memory archive. Paths are absolute guest paths; parent directories are added implicitly.
/// A later entry for the same path replaces the earlier one.
#[derive(Debug, Default)]
pub struct Archive {
    // Sorted by path, so every directory precedes its contents as the kernel requires.
    entries: BTreeMap<String, Entry>,
}

impl Archive {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn dir(&mut self, path: &str) {
        let key = self.parents(path);
        if !key.is_empty() {
            self.entries.insert(key, Entry::Dir);
        }
    }

    pub fn file(&mut self, path: &str, data: Vec<u8>, mode: u32) {
        let key = self.parents(path);
        self.entries.insert(key, Entry::File { data, mode });
    }

    pub fn symlink(&mut self, path: &str, target: &str) {
        let key = self.parents(path);
        self.entries.insert(key, Entry::Symlink(target.to_string()));
    }

    pub fn char_dev(&mut self, path: &str, major: u32, minor: u32, mode: u32) {
        let key = self.parents(path);
        self.entries
            .insert(key, Entry::CharDev { major, minor, mode });
    }

    pub fn contains(&self, path: &str) -> bool {
        self.entries.contains_key(normalize(path))
    }

    /// Total payload size in bytes (before compression).
    pub fn payload_len(&self) -> usize {
        self.entries
            .values()
            .map(|e| match e {
                Entry::File { data, .. } => data.len(),
                _ => 0,
            })
            .sum()
    }

    /// Adds directory entries for every ancestor of `path` and returns its archive name.
    fn parents(&mut self, path: &str) -> String {
        let name = normalize(path).to_string();
        let mut end = 0;
        while let Some(i) = name[end..].find('/') {
            let parent = &name[..end + i];
            self.entries.entry(parent.to_string()).or_insert(Entry::Dir);
            end += i + 1;
        }
        name
    }

    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let mut w = Writer { out, offset: 0 };
        for (ino, (name, entry)) in self.entries.iter().enumerate() {
            let ino = ino as u32 + 1;
            match entry {
                Entry::Dir => w.entry(name, ino, S_IFDIR | 0o755, 2, (0, 0), &[])?,
                Entry::File { data, mode } => {
                    w.entry(name, ino, S_IFREG | (mode & 0o7777), 1, (0, 0), data)?
                }
                Entry::Symlink(target) => {
                    w.entry(name, ino, S_IFLNK | 0o777, 1, (0, 0), target.as_bytes())?
                }
                Entry::CharDev { major, minor, mode } => w.entry(
                    name,
                    ino,
                    S_IFCHR | (mode & 0o7777),
                    1,
                    (*major, *minor),
                    &[],
                )?,
            }
        }
        w.entry("TRAILER!!!", 0, 0, 1, (0, 0), &[])
    }
}

fn normalize(path: &str) -> &str {
    path.trim_start_matches('/').trim_end_matches('/')
}

struct Writer<'a, W: Write> {
    out: &'a mut W,
    offset: usize,
}

impl<W: Write> Writer<'_, W> {
    fn entry(
        &mut self,
        name: &str,
        ino: u32,
        mode: u32,
        nlink: u32,
        rdev: (u32, u32),
        data: &[u8],
    ) -> io::Result<()> {
        let fields = [
            ino,
            mode,
            0, // uid
            0, // gid
            nlink,
            0, // mtime
            data.len() as u32,
            0, // dev major
            0, // dev minor
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0, // check
        ];
        let mut header = String::with_capacity(110);
        header.push_str("070701");
        for f in fields {
            header.push_str(&format!("{f:08x}"));
        }
        self.put(header.as_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&[0])?;
        self.pad()?;
        self.put(data)?;
        self.pad()
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.offset += bytes.len();
        Ok(())
    }

    fn pad(&mut self) -> io::Result<()> {
        let n = (4 - self.offset % 4) % 4;
        self.put(&[0u8; 3][..n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_come_first_and_alignment_holds() {
        let mut a = Archive::new();
        a.file("/usr/lib/x/libc.so.6", b"abc".to_vec(), 0o755);
        a.symlink("/bin/sh", "/bin/busybox");
        let mut buf = Vec::new();
        a.write_to(&mut buf).unwrap();
        assert_eq!(buf.len() % 4, 0);
        let text = String::from_utf8_lossy(&buf);
        let pos = |s: &str| text.find(&format!("{s}\0")).unwrap();
        assert!(pos("usr") < pos("usr/lib"));
        assert!(pos("usr/lib") < pos("usr/lib/x"));
        assert!(pos("usr/lib/x") < pos("usr/lib/x/libc.so.6"));
        assert!(text.contains("TRAILER!!!\0"));
        assert!(a.contains("bin"));
    }

    #[test]
    fn header_is_newc() {
        let mut a = Archive::new();
        a.file("f", b"hello".to_vec(), 0o644);
        let mut buf = Vec::new();
        a.write_to(&mut buf).unwrap();
        assert!(buf.starts_with(b"070701"));
        // mode field: regular file 0644
        assert_eq!(&buf[14..22], b"000081a4");
        // filesize field
        assert_eq!(&buf[54..62], b"00000005");
        // name "f\0" follows the 110-byte header, data starts 4-aligned at 112
        assert_eq!(&buf[110..112], b"f\0");
        assert_eq!(&buf[112..117], b"hello");
    }
}
