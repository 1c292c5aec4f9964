//! The manual under `docs/` held to the command-line definitions the man pages are generated
//! from (`generate`): every command has its page, every option is documented, and no page
//! (nor the README) names an option that rcutrace lacks. Only what is in backticks counts: inline code in the text,
//! and the command lines of code blocks.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

use clap::CommandFactory as _;

use crate::cli::Cli;

/// Pages for what several commands share, with the options each is about: an option is
/// documented for a command when its own page has it in backticks, or the page about it.
const SHARED_PAGES: [(&str, &[&str]); 2] = [
    ("by-and-stacks.md", &["--by", "--top"]),
    ("over-time.md", &["--interval", "--cumulative"]),
];

/// Further pages where a command's options are documented: `gplat` has a page of its own,
/// but its options are those of both latency commands, listed on `srlat`'s page.
const ALSO_DOCUMENTED_ON: [(&str, &str); 1] = [("gplat", "srlat.md")];

/// Words that start another tool's command line: their options are that tool's, not checked.
const OTHER_TOOLS: [&str; 3] = ["cargo", "scripts/setup", "rcu-workload"];

/// Options of other tools that the pages mention on their own, outside a command line.
const OTHER_TOOLS_OPTIONS: [&str; 14] = [
    // cargo xtask vm (docs/vm.md, docs/README.md), --kernel of cargo xtask bench too
    "--append",
    "--bpftrace",
    "--cpus",
    "--idle",
    "--kernel",
    "--max-cpus",
    "--memory-mb",
    "--test-module",
    "--timeout",
    // cargo xtask bench (docs/benchmark.md)
    "--calls",
    "--membarriers",
    "--reps",
    "--scaling",
    "--window",
];

/// Options of the top-level command, which every command takes, that take a value.
const GLOBAL_WITH_VALUE: [&str; 4] = ["-f", "--format", "--save", "--flamegraph"];

fn docs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs")
}

/// The long options of a command as `--name`, without clap's own `--help` and `--version`.
fn long_options(command: &clap::Command) -> BTreeSet<String> {
    command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set())
        .filter_map(|arg| arg.get_long())
        .filter(|long| !matches!(*long, "help" | "version"))
        .map(|long| format!("--{long}"))
        .collect()
}

/// Each visible command's name with its long options.
fn commands() -> BTreeMap<String, BTreeSet<String>> {
    Cli::command()
        .get_subcommands()
        .filter(|command| !command.is_hide_set())
        .map(|command| (command.get_name().to_owned(), long_options(command)))
        .collect()
}

/// The `--option` words of a text.
fn option_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(found) = text[at..].find("--") {
        let start = at + found;
        let mut end = start + 2;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'-') {
            end += 1;
        }
        let after_word =
            start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'-');
        if !after_word && bytes.get(start + 2).is_some_and(u8::is_ascii_lowercase) {
            words.push(text[start..end].trim_end_matches('-').to_owned());
        }
        at = end;
    }
    words
}

/// What is in backticks on a page: the inline code of its text (a span may go over a line
/// break), and the command lines of its code blocks (`$ ` taken off, lines continued with
/// `\` joined), which are kept only where they run rcutrace.
struct Code {
    inline: Vec<String>,
    command_lines: Vec<String>,
}

fn code_of(page: &str) -> Code {
    let mut text = String::new();
    let mut command_lines = Vec::new();
    let mut in_block = false;
    let mut continued: Option<String> = None;
    for line in page.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            text.push_str(line);
            text.push(' ');
            continue;
        }
        let line = line.trim();
        let line = line.strip_prefix("$ ").unwrap_or(line);
        let joined = match continued.take() {
            Some(start) => format!("{start} {line}"),
            None => line.to_owned(),
        };
        match joined.strip_suffix('\\') {
            Some(start) => continued = Some(start.to_owned()),
            None => command_lines.push(joined),
        }
    }
    let inline = text
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    let command_lines = command_lines
        .into_iter()
        .filter(|line| runs_rcutrace(line))
        .collect();
    Code {
        inline,
        command_lines,
    }
}

/// The words of a command line without `sudo` in front.
fn words(line: &str) -> Vec<&str> {
    let mut words: Vec<&str> = line.split_whitespace().collect();
    if words.first() == Some(&"sudo") {
        words.remove(0);
    }
    words
}

fn runs_rcutrace(line: &str) -> bool {
    words(line)
        .first()
        .is_some_and(|word| word.rsplit('/').next() == Some("rcutrace"))
}

/// The command a span or command line runs, if it starts as `[rcutrace] [GLOBAL...] COMMAND`
/// or is a command line of rcutrace (`None` inside: rcutrace without a command).
fn command_of<'a>(
    code: &str,
    commands: &'a BTreeMap<String, BTreeSet<String>>,
) -> Option<Option<&'a str>> {
    let words = words(code);
    let mut rest = words.as_slice();
    let rcutrace = runs_rcutrace(code);
    if rcutrace {
        rest = &rest[1..];
    }
    while let [option, _value, more @ ..] = rest {
        if !GLOBAL_WITH_VALUE.contains(option) {
            break;
        }
        rest = more;
    }
    match rest.first().and_then(|word| commands.get_key_value(*word)) {
        Some((name, _)) => Some(Some(name.as_str())),
        None => rcutrace.then_some(None),
    }
}

fn pages() -> BTreeMap<String, String> {
    let mut pages = BTreeMap::new();
    for entry in fs::read_dir(docs_dir()).expect("docs/") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            pages.insert(name, fs::read_to_string(&path).unwrap());
        }
    }
    pages
}

/// Every command has a page named after it.
#[test]
fn every_command_has_its_page() {
    let pages = pages();
    for name in commands().keys() {
        assert!(
            pages.contains_key(&format!("{name}.md")),
            "docs/{name}.md: no page for `rcutrace {name}`"
        );
    }
}

/// Every option of every command is in backticks on the command's page or the shared page
/// about it (or, for gplat, on srlat's); the top-level options anywhere in the manual.
#[test]
fn every_option_is_documented() {
    let pages = pages();
    let documented = |page: &str| -> BTreeSet<String> {
        pages
            .get(page)
            .map(|text| {
                code_of(text)
                    .inline
                    .iter()
                    .flat_map(|span| option_words(span))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut missing = Vec::new();
    for (name, options) in commands() {
        let own = format!("{name}.md");
        let also = ALSO_DOCUMENTED_ON
            .iter()
            .filter(|(command, _)| *command == name)
            .map(|(_, page)| *page);
        let shared = SHARED_PAGES.iter().flat_map(|(page, about)| {
            documented(page)
                .into_iter()
                .filter(|option| about.contains(&option.as_str()))
        });
        let on: BTreeSet<String> = [own.as_str()]
            .into_iter()
            .chain(also)
            .flat_map(documented)
            .chain(shared)
            .collect();
        missing.extend(
            options
                .difference(&on)
                .map(|option| format!("{name} {option} (not on docs/{own})")),
        );
    }
    let anywhere: BTreeSet<String> = pages.keys().flat_map(|page| documented(page)).collect();
    missing.extend(
        long_options(&Cli::command())
            .difference(&anywhere)
            .map(|option| format!("rcutrace {option} (nowhere in docs/)")),
    );
    assert!(missing.is_empty(), "undocumented options: {missing:#?}");
}

/// What the manual and the README put in backticks names only options that exist: a span or
/// command line that runs a command, only that command's options and the top-level ones;
/// any other span, options of some command, or of the other tools listed above.
#[test]
fn no_page_names_an_option_rcutrace_lacks() {
    let commands = commands();
    let global = long_options(&Cli::command());
    let any: BTreeSet<String> = commands
        .values()
        .flatten()
        .chain(&global)
        .cloned()
        .collect();
    let mut texts: BTreeMap<String, String> = pages()
        .into_iter()
        .map(|(name, text)| (format!("docs/{name}"), text))
        .collect();
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    texts.insert("README.md".into(), fs::read_to_string(readme).unwrap());
    let mut unknown = Vec::new();
    for (page, text) in &texts {
        let code = code_of(text);
        for span in code.inline.iter().chain(&code.command_lines) {
            let accepted: BTreeSet<&String> = match command_of(span, &commands) {
                Some(Some(name)) => commands[name].iter().chain(&global).collect(),
                Some(None) => global.iter().collect(),
                None if words(span)
                    .first()
                    .is_some_and(|word| OTHER_TOOLS.contains(word)) =>
                {
                    continue;
                }
                None => any.iter().collect(),
            };
            for option in option_words(span) {
                if option == "--help" || option == "--version" {
                    continue; // clap's own, on every command
                }
                if !accepted.contains(&option) && !OTHER_TOOLS_OPTIONS.contains(&option.as_str()) {
                    unknown.push(format!("{page}: {option} in `{span}`"));
                }
            }
        }
    }
    assert!(unknown.is_empty(), "options no command has: {unknown:#?}");
}

/// The allow-list stays exact: each of its options is another tool's, mentioned on a page.
#[test]
fn other_tools_options_are_not_rcutraces_and_are_used() {
    let global = long_options(&Cli::command());
    let all: BTreeSet<String> = commands().into_values().flatten().chain(global).collect();
    let mentioned: BTreeSet<String> = pages()
        .values()
        .flat_map(|text| code_of(text).inline)
        .flat_map(|span| option_words(&span))
        .collect();
    for option in OTHER_TOOLS_OPTIONS {
        assert!(!all.contains(option), "{option} is rcutrace's own");
        assert!(mentioned.contains(option), "{option} is on no page");
    }
}

#[test]
fn option_words_and_commands_are_read_as_written() {
    assert_eq!(
        option_words("--by comm|pid, a--b, --top N, -- , --fail-if"),
        ["--by", "--top", "--fail-if"]
    );
    let commands = commands();
    assert_eq!(
        command_of("sudo rcutrace -f folded srlat --by stack", &commands),
        Some(Some("srlat"))
    );
    assert_eq!(command_of("count --all", &commands), Some(Some("count")));
    assert_eq!(command_of("rcutrace --version", &commands), Some(None));
    assert_eq!(command_of("--unit ms|us|ns", &commands), None);
    let code = code_of("a `count\n--all` b\n```\n$ sudo rcutrace gp \\\n  --top 3\nout --x\n```\n");
    assert_eq!(code.inline, ["count --all"]);
    assert_eq!(code.command_lines, ["sudo rcutrace gp  --top 3"]);
}
