//! `--save FILE`: the run's JSON lines, as `-f json` prints them, in a file. The file is
//! opened before anything is attached, so that a path that cannot be written is a usage error
//! and not a run thrown away at its end; a write that still fails later is reported after the
//! results have been printed. With `--interval` every interval is written as it is printed.
//! What is written is made by the commands (`commands::save`): this module keeps the file.

use std::{
    fs::File,
    io::{self, Write as _},
    path::{Path, PathBuf},
    sync::Mutex,
};

use anyhow::{Context as _, Result};

/// Where the run is being saved, and the first write that failed.
pub struct SaveFile {
    path: PathBuf,
    file: File,
    /// Made by rcutrace: removed again if the run ends without a result.
    created: bool,
    /// A regular file is emptied before the first write; a device or pipe cannot be.
    regular: bool,
    written: bool,
    failure: Option<io::Error>,
    /// What a failure to write says it was doing: `saving the run`.
    doing: &'static str,
}

impl SaveFile {
    /// Opens `path` for writing without truncating it (a run that never starts leaves an
    /// existing file as it was), and proves it takes a write: a zero-length write fails on
    /// files that only look writable, such as /proc/version.
    pub fn open(path: &Path) -> Result<SaveFile, String> {
        Self::open_for("--save", "saving the run", path)
    }

    /// `open` for the file of another option (`--flamegraph`), which its errors name, as
    /// they say what it was `doing`.
    pub fn open_for(option: &str, doing: &'static str, path: &Path) -> Result<SaveFile, String> {
        let refuse = |e: io::Error| {
            format!(
                "{option} {}: cannot be written ({e}); give a file that can be created or \
                 overwritten, in a directory that exists",
                path.display()
            )
        };
        if path.is_dir() {
            return Err(refuse(io::Error::from(io::ErrorKind::IsADirectory)));
        }
        let existed = path.exists();
        let mut file = File::options()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(refuse)?;
        let writable = file.write(&[]).and_then(|_| file.flush());
        if let Err(e) = writable {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            return Err(refuse(e));
        }
        let regular = file.metadata().is_ok_and(|m| m.is_file());
        Ok(SaveFile {
            path: path.to_path_buf(),
            file,
            created: !existed,
            regular,
            written: false,
            failure: None,
            doing,
        })
    }

    /// Writes one report (the whole run, or one interval), as `lines` make it: they are told
    /// whether it is the file's first (which starts with the banner), and the first replaces
    /// what the file held. After a failure nothing more is tried, and nothing is made.
    pub fn write(&mut self, lines: impl FnOnce(bool) -> String) {
        if self.failure.is_some() {
            return;
        }
        let json = lines(!self.written);
        self.append(json.as_bytes());
    }

    /// Writes `bytes` after what this run wrote before (the first write replaces the file's
    /// old content). After a failure nothing more is tried.
    pub fn append(&mut self, bytes: &[u8]) {
        if self.failure.is_some() {
            return;
        }
        let result = (if self.written || !self.regular {
            Ok(())
        } else {
            self.file.set_len(0)
        })
        .and_then(|()| self.file.write_all(bytes))
        .and_then(|()| self.file.flush());
        self.written = true;
        if let Err(e) = result {
            self.failure = Some(e);
        }
    }

    /// Whether everything reached the file.
    pub fn finish(self) -> Result<()> {
        let SaveFile {
            path,
            file,
            failure,
            regular,
            doing,
            ..
        } = self;
        let synced = match failure {
            Some(e) => Err(e),
            // Devices and pipes have nothing to sync.
            None if !regular => Ok(()),
            None => file.sync_all(),
        };
        synced.with_context(|| format!("{doing} to {}", path.display()))
    }

    /// The run failed before it had anything to save: a file rcutrace made goes again.
    pub fn discard(self) {
        if self.created && !self.written {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The run's save file, set by `main` before the command runs: the interval reports are
/// printed deep inside the tracing window, and each goes to the file as it is printed.
static SAVE: Mutex<Option<SaveFile>> = Mutex::new(None);

pub fn set(file: SaveFile) {
    *SAVE.lock().unwrap_or_else(|e| e.into_inner()) = Some(file);
}

/// Writes a report to the save file as `lines` make it (see `SaveFile::write`), if the run
/// has one: without one, nothing is made.
pub fn write(lines: impl FnOnce(bool) -> String) {
    if let Some(file) = SAVE.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        file.write(lines);
    }
}

/// Takes the save file back, to finish or discard it.
pub fn take() -> Option<SaveFile> {
    SAVE.lock().unwrap_or_else(|e| e.into_inner()).take()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report's lines: the banner before the file's first.
    fn report(count: u64) -> impl FnOnce(bool) -> String {
        move |first| {
            let banner = if first { "banner\n" } else { "" };
            format!("{banner}report {count}\n")
        }
    }

    #[test]
    fn paths_that_cannot_be_written_are_refused_before_the_run() {
        for path in ["/nonexistent/dir/x.json", "/proc/version", "/"] {
            let err = SaveFile::open(Path::new(path)).err().unwrap();
            assert!(
                err.starts_with(&format!("--save {path}: cannot be written (")),
                "{err}"
            );
            assert!(err.contains("can be created or overwritten"), "{err}");
        }
        assert!(!Path::new("/nonexistent").exists());
    }

    #[test]
    fn every_report_is_written_and_an_untouched_file_is_kept_until_then() {
        let dir = std::env::temp_dir().join(format!("rcutrace-save-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.json");
        std::fs::write(&path, "an older run, longer than the new one\n".repeat(100)).unwrap();
        let mut file = SaveFile::open(&path).unwrap();
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .starts_with("an older run")
        );
        file.write(report(1));
        file.write(report(2));
        file.finish().unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "banner\nreport 1\nreport 2\n"
        );

        // A run that failed before any result takes away the file it made, and only that.
        let made = dir.join("made.json");
        SaveFile::open(&made).unwrap().discard();
        assert!(!made.exists());
        SaveFile::open(&path).unwrap().discard();
        assert!(path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_write_that_fails_is_reported_at_the_end() {
        // /dev/full fails even the empty write: refused before the run.
        let err = SaveFile::open(Path::new("/dev/full")).err().unwrap();
        assert!(err.contains("No space left on device"), "{err}");
        // A file that took the check and then refuses the write (as a disk that fills up
        // during the run does): the failure comes back from `finish`, with its cause.
        let path = std::env::temp_dir().join(format!("rcutrace-full-{}", std::process::id()));
        std::fs::write(&path, "").unwrap();
        let mut file = SaveFile {
            path: path.clone(),
            file: File::open(&path).unwrap(),
            created: false,
            regular: false,
            written: false,
            failure: None,
            doing: "saving the run",
        };
        file.write(report(1));
        file.write(report(2));
        let err = file.finish().unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("saving the run to {}", path.display())
        );
        assert!(
            format!("{err:#}").contains("Bad file descriptor"),
            "{err:#}"
        );
        std::fs::remove_file(&path).unwrap();
    }
}
