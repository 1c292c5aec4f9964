//! BENCHMARKS.md as one section per kernel series: a full-size run on a kernel replaces that
//! kernel's section and keeps the others, so the file holds the latest run on each kernel the
//! suite boots, in the order of their versions.

/// What the file says of itself, above the sections.
const INTRO: &str = "# Benchmarks\n\n\
rcutrace against bpftrace and against no tracer, measured side by side in one guest, on each \
kernel the test suite boots. Each section is written by a full-size `cargo xtask bench \
--kernel SERIES` on that kernel, which replaces its own section and leaves the others as they \
were; edit the generator in `bench/src/`, not this file.\n";

fn start_marker(series: &str) -> String {
    format!("<!-- kernel {series} -->")
}

fn end_marker(series: &str) -> String {
    format!("<!-- end of kernel {series} -->")
}

/// The series (`6.12`) of a kernel release (`6.12.117+deb12-cloud-amd64`).
pub fn series(release: &str) -> Option<String> {
    let mut numbers = release.split(['.', '-', '+']);
    let major: u32 = numbers.next()?.parse().ok()?;
    let minor: u32 = numbers.next()?.parse().ok()?;
    Some(format!("{major}.{minor}"))
}

/// The key of a kernel's scaling section (`--scaling CPUS`), kept beside its main one.
pub fn scaling_key(series: &str, cpus: u32) -> String {
    format!("{series}, {cpus} CPUs")
}

/// A section's key as numbers, for ordering: 6.1 < 6.12 < 7.3, and a kernel's scaling
/// section (`6.12, 64 CPUs`) right after its main one.
fn version(key: &str) -> (u32, u32, bool) {
    let (series, scaling) = match key.split_once(", ") {
        Some((series, _)) => (series, true),
        None => (key, false),
    };
    let mut numbers = series.split('.').map(|n| n.parse().unwrap_or(0));
    (
        numbers.next().unwrap_or(0),
        numbers.next().unwrap_or(0),
        scaling,
    )
}

/// The sections of a BENCHMARKS.md, by series, in file order. A file from before sections
/// (one run, no markers) is one section, its kernel's: from its `- Kernel:` line on, under a
/// section's heading, its own headings one level down.
fn sections(md: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = md;
    while let Some(at) = rest.find("<!-- kernel ") {
        let after = &rest[at + "<!-- kernel ".len()..];
        let Some(close) = after.find(" -->") else {
            break;
        };
        let series = after[..close].to_string();
        let body_start = close + " -->".len();
        let end = end_marker(&series);
        let Some(body_len) = after[body_start..].find(&end) else {
            break;
        };
        let body = after[body_start..body_start + body_len].trim_matches('\n');
        found.push((series, format!("{body}\n")));
        rest = &after[body_start + body_len + end.len()..];
    }
    if found.is_empty()
        && let Some(at) = md.find("\n- Kernel: `")
        && let Some(series) = series(&md[at + "\n- Kernel: `".len()..])
    {
        let body = md[at + 1..].replace("\n## ", "\n### ");
        found.push((
            series.clone(),
            format!("## Debian's {series} kernel\n\n{body}"),
        ));
    }
    found
}

/// `series`' section of a BENCHMARKS.md, where it has one.
pub fn section(md: &str, series: &str) -> Option<String> {
    sections(md)
        .into_iter()
        .find_map(|(s, body)| (s == series).then_some(body))
}

/// The file with `section` as `series`' section, the other kernels' kept as they were.
pub fn with_section(md: &str, series: &str, section: &str) -> String {
    let mut all: Vec<(String, String)> = sections(md)
        .into_iter()
        .filter(|(s, _)| s != series)
        .collect();
    all.push((series.to_string(), section.to_string()));
    all.sort_by_key(|(s, _)| version(s));
    let mut out = String::from(INTRO);
    for (s, body) in &all {
        out.push_str(&format!(
            "\n{}\n{}\n{}\n",
            start_marker(s),
            body.trim_matches('\n'),
            end_marker(s)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section_of(series: &str, figure: u32) -> String {
        format!(
            "## Debian's {series} kernel\n\n- Kernel: `{series}.9+deb-cloud-amd64` (Debian)\n\n\
             | row | {figure} |\n"
        )
    }

    #[test]
    fn a_series_is_major_and_minor() {
        assert_eq!(
            series("6.12.117+deb12-cloud-amd64").as_deref(),
            Some("6.12")
        );
        assert_eq!(series("7.3.4+deb13-cloud-amd64").as_deref(), Some("7.3"));
        assert_eq!(series("6.1.0-57-cloud-amd64").as_deref(), Some("6.1"));
        assert_eq!(series("vmlinuz"), None);
    }

    #[test]
    fn a_run_replaces_its_kernels_section_and_keeps_the_others_in_version_order() {
        let md = with_section("", "7.3", &section_of("7.3", 1));
        let md = with_section(&md, "6.12", &section_of("6.12", 2));
        let md = with_section(&md, "6.1", &section_of("6.1", 3));
        let md = with_section(&md, "6.12", &section_of("6.12", 4));
        assert!(md.starts_with(INTRO), "{md}");
        let order: Vec<String> = sections(&md).into_iter().map(|(s, _)| s).collect();
        assert_eq!(order, ["6.1", "6.12", "7.3"]);
        assert_eq!(section(&md, "6.12"), Some(section_of("6.12", 4)));
        assert_eq!(section(&md, "7.3"), Some(section_of("7.3", 1)));
        assert_eq!(md.matches("## Debian's 6.12 kernel").count(), 1, "{md}");
        // Written again unchanged, the file reads back the same.
        assert_eq!(with_section(&md, "7.3", &section_of("7.3", 1)), md);
    }

    #[test]
    fn a_kernels_scaling_section_follows_its_main_one() {
        let many = scaling_key("6.12", 64);
        let md = with_section("", &many, "## Debian's 6.12 kernel at 64 CPUs\n");
        let md = with_section(&md, "7.3", &section_of("7.3", 1));
        let md = with_section(&md, "6.12", &section_of("6.12", 2));
        let md = with_section(&md, "6.1", &section_of("6.1", 3));
        let order: Vec<String> = sections(&md).into_iter().map(|(s, _)| s).collect();
        assert_eq!(order, ["6.1", "6.12", "6.12, 64 CPUs", "7.3"]);
        assert_eq!(
            section(&md, &many).as_deref(),
            Some("## Debian's 6.12 kernel at 64 CPUs\n")
        );
    }

    #[test]
    fn a_file_from_before_sections_is_its_kernels_one_section() {
        let old = "# Benchmarks\n\nintro\n\n- Kernel: `6.12.117+deb12-cloud-amd64` (Debian), \
                   2 CPUs\n\n| row | 9 |\n\n## What was run\n\ntext\n";
        let kept = "## Debian's 6.12 kernel\n\n- Kernel: `6.12.117+deb12-cloud-amd64` \
                    (Debian), 2 CPUs\n\n| row | 9 |\n\n### What was run\n\ntext\n";
        assert_eq!(section(old, "6.12").as_deref(), Some(kept));
        assert_eq!(section(old, "7.3"), None);
        // Its own kernel's run replaces it; another kernel's keeps it as its section.
        let md = with_section(old, "6.12", &section_of("6.12", 1));
        assert!(!md.contains("| row | 9 |"), "{md}");
        let md = with_section(old, "7.3", &section_of("7.3", 1));
        assert_eq!(section(&md, "6.12").as_deref(), Some(kept));
        assert_eq!(sections(&md).len(), 2, "{md}");
    }
}
