//! scripts/setup leaves the machine as it was and keeps out of the standard output. The
//! package choice (scripts/lib/debian.sh) runs against stand-ins for apt-get and apt-cache that
//! reproduce what happened on a fresh machine: the default qemu-system-x86 (bookworm) would
//! remove the qemu-utils it had from bookworm-backports; and on another, whose apt sources did
//! not list bookworm-backports at all, though its qemu-utils came from there.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use xtask::workspace;

const APT_CACHE: &str = r#"#!/bin/sh
[ "$1" = policy ] || exit 1
cat <<'POLICY'
qemu-system-x86:
  Installed: (none)
  Candidate: 1:7.2+dfsg-7+deb12u18+b3
  Version table:
     1:10.0.2+ds-1~bpo12+1 100
        100 http://deb.debian.org/debian bookworm-backports/main amd64 Packages
     1:7.2+dfsg-7+deb12u18+b3 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
POLICY
"#;

/// The same machine with bookworm-backports missing from its apt sources.
const APT_CACHE_NO_BACKPORTS: &str = r#"#!/bin/sh
[ "$1" = policy ] || exit 1
cat <<'POLICY'
qemu-system-x86:
  Installed: (none)
  Candidate: 1:7.2+dfsg-7+deb12u18+b3
  Version table:
     1:7.2+dfsg-7+deb12u18+b3 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
     1:7.2+dfsg-7+deb12u15 500
        500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
POLICY
"#;

/// Simulations (`-s`) remove qemu-utils unless the packages come from bookworm-backports
/// (always, with STUB_ALWAYS_REMOVES; only through a sources list naming it, with
/// STUB_NO_BACKPORTS); a real install prints dpkg's progress on stdout.
const APT_GET: &str = r#"#!/bin/sh
echo "$*" >>"$STUB_LOG"
case " $* " in
*" update "*) exit 0 ;;
*" -s "*)
    if [ -n "$STUB_NO_BACKPORTS" ]; then
        case " $* " in
        *" -t bookworm-backports "*Dir::Etc::sourcelist=*|*Dir::Etc::sourcelist=*" -t bookworm-backports "*)
            grep -q ' bookworm-backports main' "$APT_PRIVATE_DIR/sources.list" && { echo "Inst qemu-system-x86 (1:10.0.2+ds-1~bpo12+1 Debian:bookworm-backports [amd64])"; exit 0; } ;;
        *" -t bookworm-backports "*) exit 100 ;;
        esac
        echo "Remv qemu-utils [1:10.0.2+ds-2+deb13u1~bpo12+1]"
        exit 0
    fi
    case " $* " in
    *" -t bookworm-backports "*) [ -z "$STUB_ALWAYS_REMOVES" ] && { echo "Inst qemu-system-x86 (1:10.0.2+ds-1~bpo12+1 Debian:bookworm-backports [amd64])"; exit 0; } ;;
    esac
    echo "Remv qemu-utils [1:10.0.2+ds-1~bpo12+1]"
    echo "Inst qemu-system-x86 (1:7.2+dfsg-7+deb12u18+b3 Debian:bookworm [amd64])"
    ;;
*)
    echo "(Reading database ... 100%"
    [ -z "$STUB_INSTALL_FAILS" ] || { echo "E: Sub-process /usr/bin/dpkg returned an error code (1)" >&2; exit 100; }
    ;;
esac
"#;

struct Stubs {
    dir: PathBuf,
}

impl Stubs {
    fn new(name: &str) -> Self {
        Self::with(name, APT_CACHE)
    }

    fn with(name: &str, apt_cache: &str) -> Self {
        let dir = workspace::target_dir()
            .join("setup-test")
            .join(format!("{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("bin")).unwrap();
        fs::write(
            dir.join("os-release"),
            "ID=debian\nVERSION_CODENAME=bookworm\n",
        )
        .unwrap();
        for (tool, text) in [("apt-cache", apt_cache), ("apt-get", APT_GET)] {
            let path = dir.join("bin").join(tool);
            fs::write(&path, text).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        }
        Stubs { dir }
    }

    fn log(&self) -> PathBuf {
        self.dir.join("apt-get.log")
    }

    /// `install_debs qemu-system-x86` with the stand-ins first on PATH.
    fn install(&self, env: &[(&str, &str)]) -> Output {
        let lib = workspace::root().join("scripts/lib/debian.sh");
        let path = format!(
            "{}:{}",
            self.dir.join("bin").display(),
            std::env::var("PATH").unwrap()
        );
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(format!(
                "set -euo pipefail; as_root() {{ \"$@\"; }}; source {}; install_debs qemu-system-x86",
                lib.display()
            ))
            .env("PATH", path)
            .env("STUB_LOG", self.log())
            .env("OS_RELEASE_FILE", self.dir.join("os-release"))
            .env("APT_PRIVATE_DIR", self.dir.join("apt-private"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    fn apt_get_calls(&self) -> Vec<String> {
        fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Stubs {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn installs_from_the_suite_that_removes_nothing() {
    let stubs = Stubs::new("fits");
    let out = stubs.install(&[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "dpkg's progress is held back");
    assert_eq!(text(&out.stderr), "");
    let calls = stubs.apt_get_calls();
    // Every real install (no -s) is the one that removes nothing.
    let installs: Vec<&String> = calls.iter().filter(|c| !c.contains(" -s ")).collect();
    assert_eq!(
        installs,
        ["install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86"],
        "{calls:?}"
    );
    assert_eq!(
        calls[0], "install -s --no-install-recommends qemu-system-x86",
        "apt's own choice is tried first: {calls:?}"
    );
}

#[test]
fn reads_the_backports_its_packages_came_from_when_the_sources_lack_it() {
    let stubs = Stubs::with("unlisted", APT_CACHE_NO_BACKPORTS);
    let out = stubs.install(&[("STUB_NO_BACKPORTS", "1")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "dpkg's progress is held back");
    assert_eq!(
        text(&out.stderr),
        "==> reading bookworm-backports (a package this machine has came from it; its own apt \
         sources untouched)\n"
    );
    let private = stubs.dir.join("apt-private");
    let sources = fs::read_to_string(private.join("sources.list")).unwrap();
    assert!(
        sources.ends_with(
            "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] \
             http://deb.debian.org/debian bookworm-backports main\n"
        ),
        "{sources}"
    );
    let options = format!(
        "-o Dir::Etc::sourcelist={}/sources.list -o Dir::State::Lists={}/lists",
        private.display(),
        private.display()
    );
    let calls = stubs.apt_get_calls();
    let installs: Vec<String> = calls.into_iter().filter(|c| !c.contains(" -s ")).collect();
    assert_eq!(
        installs,
        [
            format!("{options} update -q"),
            format!(
                "{options} install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86"
            )
        ],
        "only the private list is updated and used"
    );
}

#[test]
fn refuses_when_every_choice_removes_a_package() {
    let stubs = Stubs::new("refuses");
    let out = stubs.install(&[("STUB_ALWAYS_REMOVES", "1")]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "not installing qemu-system-x86: every version apt offers would remove a package \
             this machine has (qemu-utils)"
        ),
        "{stderr}"
    );
    let calls = stubs.apt_get_calls();
    assert!(calls.iter().all(|c| c.contains(" -s ")), "{calls:?}");
    // apt's default, then bookworm and bookworm-backports.
    assert_eq!(calls.len(), 3, "{calls:?}");
}

#[test]
fn a_failing_install_shows_its_output_on_stderr() {
    let stubs = Stubs::new("fails");
    let out = stubs.install(&[("STUB_INSTALL_FAILS", "1")]);
    assert!(!out.status.success());
    assert_eq!(text(&out.stdout), "");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("(Reading database ... 100%"), "{stderr}");
    assert!(stderr.contains("dpkg returned an error code"), "{stderr}");
}

/// The real script, on a machine it has already set up: nothing at all on stdout.
#[test]
fn setup_writes_nothing_to_stdout() {
    let out = Command::new("bash")
        .arg(Path::new(&workspace::setup_script()))
        .current_dir(workspace::root())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
}
