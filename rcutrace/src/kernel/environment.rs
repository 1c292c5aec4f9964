//! What a run ran on, recorded with every JSON run so that two runs can be compared: the
//! kernel, its preemption model and HZ, the RCU settings that change the figures, and how each
//! function was hooked. Whatever cannot be read is left out, never guessed.

use std::{
    fmt::Display,
    fs,
    path::Path,
    sync::atomic::{AtomicBool, Ordering},
};

use rcutrace_common::records::{Environment, Members};

/// Whether this run's reports carry their environment: set once by `main`.
static RECORDED: AtomicBool = AtomicBool::new(true);

/// Records the environment only where a report carries it (JSON output, a saved run). Reading
/// it opens some thirty sysfs files, and the kernel frees each open file's state through
/// kvfree_call_rcu() when it is closed: RCU work in the kernel being measured, for a text
/// report that never shows it.
pub fn record_only_if(needed: bool) {
    RECORDED.store(needed, Ordering::Relaxed);
}

/// The running kernel's environment, if this run records it (`record_only_if`); `attached`
/// is how each probe was hooked: its function and the method, in the order attached.
pub fn current<'a, M: Display>(
    attached: impl IntoIterator<Item = (&'a str, M)>,
) -> Option<Environment> {
    RECORDED
        .load(Ordering::Relaxed)
        .then(|| read_current(attached))
}

fn read_current<'a, M: Display>(attached: impl IntoIterator<Item = (&'a str, M)>) -> Environment {
    let release = read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default();
    let version = read_trimmed("/proc/sys/kernel/version").unwrap_or_default();
    let preemption = read_trimmed("/sys/kernel/debug/sched/preempt")
        .and_then(|modes| current_mode(&modes))
        .map(|mode| format!("{mode} (dynamic)"))
        .or_else(|| preemption_from_version(&version));
    let hz = kernel_config(&release).and_then(|config| hz_from_config(&config));
    Environment {
        kernel_release: release,
        kernel_version: version,
        cpus: online_cpus(),
        hz,
        preemption,
        rcu_expedited: read_trimmed("/sys/kernel/rcu_expedited"),
        rcu_normal: read_trimmed("/sys/kernel/rcu_normal"),
        rcutree_parameters: Members(parameters(Path::new("/sys/module/rcutree/parameters"))),
        attach: Members(attach_methods(attached)),
        missed_by_kernel_lower_bound: super::misses::uncounted(),
    }
}

/// How many probes were attached: one method per probe in `attach`.
pub fn probes(environment: &Environment) -> usize {
    environment
        .attach
        .0
        .iter()
        .map(|(_, methods)| methods.split('+').count())
        .sum()
}

/// The running kernel's configuration: /proc/config.gz (CONFIG_IKCONFIG_PROC), else the
/// distribution's /boot/config-RELEASE (Debian, Ubuntu, Fedora).
fn kernel_config(release: &str) -> Option<String> {
    let from_proc = fs::File::open("/proc/config.gz").ok().and_then(gunzipped);
    from_proc.or_else(|| fs::read_to_string(format!("/boot/config-{release}")).ok())
}

fn gunzipped(compressed: impl std::io::Read) -> Option<String> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(compressed), &mut text)
        .ok()
        .map(|_| text)
}

fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_string())
}

fn online_cpus() -> u64 {
    // SAFETY: sysconf reads a system value.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u64::try_from(cpus).unwrap_or(0)
}

/// The mode in parentheses of `none (voluntary) full`.
fn current_mode(modes: &str) -> Option<String> {
    let start = modes.find('(')? + 1;
    let end = start + modes[start..].find(')')?;
    Some(modes[start..end].to_string())
}

/// The preemption model a kernel's `uname -v` names (`#1 SMP PREEMPT_DYNAMIC Debian ...`).
fn preemption_from_version(version: &str) -> Option<String> {
    let words: Vec<&str> = version.split_whitespace().collect();
    ["PREEMPT_RT", "PREEMPT_DYNAMIC", "PREEMPT"]
        .into_iter()
        .find(|flag| words.contains(flag))
        .map(String::from)
}

/// `CONFIG_HZ=250` from a kernel configuration.
fn hz_from_config(config: &str) -> Option<u64> {
    config
        .lines()
        .find_map(|line| line.strip_prefix("CONFIG_HZ="))
        .and_then(|hz| hz.trim().parse().ok())
}

/// Every readable parameter of a module, by name.
fn parameters(dir: &Path) -> Vec<(String, String)> {
    let mut parameters: Vec<(String, String)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let value = read_trimmed(entry.path())?;
            Some((entry.file_name().to_string_lossy().into_owned(), value))
        })
        .collect();
    parameters.sort();
    parameters
}

/// `function: method+method` in the order the functions were attached.
fn attach_methods<'a, M: Display>(
    attached: impl IntoIterator<Item = (&'a str, M)>,
) -> Vec<(String, String)> {
    let mut methods: Vec<(String, String)> = Vec::new();
    for (function, method) in attached {
        match methods.iter_mut().find(|(f, _)| f == function) {
            Some((_, joined)) => {
                joined.push('+');
                joined.push_str(&method.to_string());
            }
            None => methods.push((function.to_string(), method.to_string())),
        }
    }
    methods
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preemption_models() {
        assert_eq!(
            current_mode("none (voluntary) full"),
            Some("voluntary".into())
        );
        assert_eq!(current_mode("none voluntary full"), None);
        assert_eq!(
            preemption_from_version("#1 SMP PREEMPT_DYNAMIC Debian 6.12.57-1 (2025-11-05)"),
            Some("PREEMPT_DYNAMIC".into())
        );
        assert_eq!(
            preemption_from_version("#1 SMP PREEMPT_RT Debian 6.1.158-1"),
            Some("PREEMPT_RT".into())
        );
        assert_eq!(preemption_from_version("#1 SMP Debian 6.1.158-1"), None);
    }

    #[test]
    fn hz_from_a_kernel_config() {
        assert_eq!(
            hz_from_config("# CONFIG_HZ_1000 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n"),
            Some(250)
        );
        assert_eq!(hz_from_config("CONFIG_HZ_250=y\n"), None);
        // /proc/config.gz is gzip'd.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, b"CONFIG_HZ=300\n").unwrap();
        let config = gunzipped(&gz.finish().unwrap()[..]).unwrap();
        assert_eq!(hz_from_config(&config), Some(300));
        assert_eq!(gunzipped(&b"CONFIG_HZ=300\n"[..]), None);
    }

    #[test]
    fn entry_and_return_of_one_function_share_a_line() {
        let attached = [
            ("synchronize_rcu", "kprobe"),
            ("synchronize_rcu", "fexit"),
            ("rcu_gp_init", "fentry"),
            ("rcu_gp_cleanup", "kretprobe"),
        ];
        assert_eq!(
            attach_methods(attached),
            [
                ("synchronize_rcu".to_string(), "kprobe+fexit".to_string()),
                ("rcu_gp_init".into(), "fentry".into()),
                ("rcu_gp_cleanup".into(), "kretprobe".into()),
            ]
        );
        let environment = Environment {
            attach: Members(attach_methods(attached)),
            ..Environment::default()
        };
        assert_eq!(probes(&environment), 4);
    }
}
