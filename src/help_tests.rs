//! The `--help` of every command: a snapshot (`tests/snapshots/help.txt`) compared in a
//! test, and each command's flags its own.

use clap::CommandFactory as _;

use super::*;

/// Every command's path below the root (`["exec"]`, `["config", "show"]`, …), hidden
/// ones included, in definition order.
fn command_paths(command: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
    for sub in command.get_subcommands() {
        let mut path = prefix.to_vec();
        path.push(sub.get_name().to_owned());
        out.push(path.clone());
        command_paths(sub, &path, out);
    }
}

/// What `agent-sandbox PATH... --help` prints (without colours, as off a terminal).
fn help(path: &[String]) -> String {
    let args = std::iter::once("agent-sandbox".to_owned()).chain(path.iter().cloned()).chain(["--help".into()]);
    match Cli::try_parse_from(args) {
        Err(err) if err.kind() == clap::error::ErrorKind::DisplayHelp => err.render().to_string(),
        Err(err) => panic!("{path:?} --help: {err}"),
        Ok(_) => panic!("{path:?} --help ran the command"),
    }
}

/// The `--help` of every command, compared with the checked-in
/// `tests/snapshots/help.txt` so that a change of the user-visible text is reviewed;
/// `UPDATE_SNAPSHOTS=1 cargo test --bin agent-sandbox` rewrites it.
#[test]
fn help_of_every_command_matches_the_snapshot() {
    let mut paths = vec![Vec::new()];
    command_paths(&Cli::command(), &[], &mut paths);
    let mut text = String::new();
    for path in &paths {
        let line = std::iter::once("agent-sandbox").chain(path.iter().map(String::as_str)).collect::<Vec<_>>();
        text.push_str(&format!("===== {} --help =====\n{}\n", line.join(" "), help(path).trim_end()));
    }
    let snapshot = include_str!("../tests/snapshots/help.txt");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/help.txt");
        fs_err::write(&file, &text).expect("writing the snapshot");
    } else {
        assert!(
            text == snapshot,
            "the --help texts changed; review them and run UPDATE_SNAPSHOTS=1 cargo test --bin agent-sandbox \
             to accept:\n{text}"
        );
    }
}

/// A command's help lists its own flags and `--help` (the root also `--version`),
/// never a parent's or a sibling's.
#[test]
fn help_of_each_command_shows_only_its_own_flags() {
    let root = Cli::command();
    let mut paths = Vec::new();
    command_paths(&root, &[], &mut paths);
    for path in std::iter::once(Vec::new()).chain(paths) {
        let mut command = &root;
        for name in &path {
            command = command.find_subcommand(name).expect("the path exists");
        }
        let mut own: Vec<String> = command
            .get_arguments()
            .filter(|arg| !arg.is_hide_set())
            .filter_map(|arg| arg.get_long().map(|long| format!("--{long}")))
            .collect();
        own.push("--help".into());
        if path.is_empty() {
            own.push("--version".into());
        }
        own.sort();
        let text = help(&path);
        let options = text.split_once("Options:\n").map_or("", |(_, options)| options);
        let mut shown: Vec<String> = options
            .lines()
            .map(str::trim_start)
            .filter(|line| line.starts_with('-'))
            .filter_map(|line| line.split([' ', ',', '=', '[', '<']).find(|word| word.starts_with("--")))
            .map(str::to_owned)
            .collect();
        shown.sort();
        assert_eq!(shown, own, "agent-sandbox {} --help:\n{text}", path.join(" "));
    }
}

/// The book's reference page of commands (`docs/src/reference/help.md`): the `--help` of
/// the root and of every command a user runs (hidden ones left out), in definition order,
/// compared with the checked-in page; `UPDATE_SNAPSHOTS=1 cargo test --bin agent-sandbox`
/// rewrites it.
#[test]
fn the_books_command_reference_is_every_commands_help() {
    fn visible_paths(command: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
        for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set() && sub.get_name() != "help") {
            let mut path = prefix.to_vec();
            path.push(sub.get_name().to_owned());
            out.push(path.clone());
            visible_paths(sub, &path, out);
        }
    }
    let mut paths = vec![Vec::new()];
    visible_paths(&Cli::command(), &[], &mut paths);
    let mut page = String::from(
        "# Every command's help\n\nWhat `agent-sandbox COMMAND --help` prints, for every command. This page is generated \
         from the binary's own definitions, and a test fails when the two differ.\n",
    );
    for path in &paths {
        let line = std::iter::once("agent-sandbox").chain(path.iter().map(String::as_str)).collect::<Vec<_>>();
        page.push_str(&format!("\n## `{}`\n\n```text\n{}\n```\n", line.join(" "), help(path).trim_end()));
    }
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference/help.md");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        fs_err::write(&file, &page).expect("writing the reference page");
    } else {
        let checked_in = fs_err::read_to_string(&file).unwrap_or_default();
        assert!(
            page == checked_in,
            "docs/src/reference/help.md differs from --help; run UPDATE_SNAPSHOTS=1 cargo test --bin agent-sandbox \
             and review the change"
        );
    }
}
