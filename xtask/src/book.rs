//! `cargo xtask book`: the book in `docs/` built with mdBook into `target/book/`, then
//! every internal link checked, in the Markdown and in the rendered pages (mdBook itself
//! does not fail on one that leads nowhere).
//! mdBook is installed into `~/.cargo/bin` with `cargo install mdbook --locked` the first
//! time, so a fresh machine needs only Rust.
//!
//! The link check and the rules for the docs' words also run as tests (`cargo test -p
//! xtask`), without mdBook: a link to a page or heading that does not exist, a README
//! longer than a screenful or two, or a page that names work items fails them.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

use crate::{root, run};

/// The mdBook release the book is built with.
const MDBOOK_VERSION: &str = "0.5.4";

/// `cargo xtask book`.
pub fn book() -> Result<()> {
    let root = root();
    let mdbook = mdbook()?;
    run(Command::new(&mdbook).arg("build").arg(root.join("docs"))).context("mdbook build")?;
    let mut broken = broken_links(&root);
    broken.extend(broken_html_links(&root.join("target/book")));
    if !broken.is_empty() {
        bail!("broken internal links in the book:\n{}", broken.join("\n"));
    }
    eprintln!("xtask: the book is in {} and its internal links resolve", root.join("target/book").display());
    Ok(())
}

/// `mdbook` on PATH or in `~/.cargo/bin`, installed there when in neither.
fn mdbook() -> Result<PathBuf> {
    let works = |path: &Path| Command::new(path).arg("--version").output().is_ok_and(|out| out.status.success());
    if works(Path::new("mdbook")) {
        return Ok(PathBuf::from("mdbook"));
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
        .context("neither CARGO_HOME nor HOME is set")?;
    let installed = home.join("bin/mdbook");
    if !works(&installed) {
        eprintln!("xtask: cargo install mdbook --locked --version {MDBOOK_VERSION} (once)");
        run(Command::new("cargo").args(["install", "mdbook", "--locked", "--version", MDBOOK_VERSION]))
            .context("installing mdBook")?;
    }
    Ok(installed)
}

/// The files below `dir` whose extension is `ext`, sorted.
fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, ext, out);
            } else if path.extension().is_some_and(|found| found == ext) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, ext, &mut out);
    out.sort();
    out
}

/// The Markdown files of the book (`docs/src/`), sorted.
fn pages(root: &Path) -> Vec<PathBuf> {
    files_with(&root.join("docs/src"), "md")
}

/// The text of `markdown` outside fenced code blocks, line by line (with line numbers).
fn prose(markdown: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (index, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((index + 1, line));
        }
    }
    out
}

/// The ids mdBook gives the headings of `markdown`: lowercased, letters, digits, `-` and
/// `_` kept, spaces made `-`, the rest dropped; a repeated id gets `-1`, `-2`, ….
pub fn heading_ids(markdown: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for (_, line) in prose(markdown) {
        let Some(title) = line.strip_prefix('#').map(|rest| rest.trim_start_matches('#')) else { continue };
        if !title.starts_with(' ') {
            continue;
        }
        let id: String = title
            .trim()
            .chars()
            .filter_map(|c| match c {
                c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_lowercase().next().unwrap_or(c)),
                c if c.is_whitespace() => Some('-'),
                _ => None,
            })
            .collect();
        let mut unique = id.clone();
        let mut count = 0;
        while ids.contains(&unique) {
            count += 1;
            unique = format!("{id}-{count}");
        }
        ids.insert(unique);
    }
    ids
}

/// The targets of the inline links of `markdown` (`[text](target)`), outside code.
pub fn link_targets(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (number, line) in prose(markdown) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((number, after[..end].to_owned()));
            rest = &after[end..];
        }
    }
    out
}

/// Every internal link of the book, README.md and the project's other documents that
/// leads to no file, or to no heading of its page, as `file:line: target`.
pub fn broken_links(root: &Path) -> Vec<String> {
    let mut files = pages(root);
    files.extend(["README.md", "CONTRIBUTING.md", "SECURITY.md", "CHANGELOG.md"].map(|name| root.join(name)));
    let mut broken = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        let rel = file.strip_prefix(root).unwrap_or(file).display().to_string();
        for (line, target) in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let page = if path.is_empty() { file.clone() } else { file.parent().unwrap_or(root).join(path) };
            let Ok(page_text) = std::fs::read_to_string(&page) else {
                broken.push(format!("{rel}:{line}: {target} (no such file)"));
                continue;
            };
            if !anchor.is_empty() && !heading_ids(&page_text).contains(anchor) {
                broken.push(format!("{rel}:{line}: {target} (no such heading)"));
            }
        }
    }
    broken
}

/// Every link in the pages' `<main>` of the built book that leads to no file, or to no
/// element of its page with that `id`, as `page: href`: the rendered book's own ids, so
/// this holds whatever rules mdBook uses to name headings.
pub fn broken_html_links(book: &Path) -> Vec<String> {
    let pages = files_with(book, "html");
    let mut broken = Vec::new();
    for page in &pages {
        let Ok(html) = std::fs::read_to_string(page) else { continue };
        let main = html.split("<main").nth(1).and_then(|rest| rest.split("</main>").next()).unwrap_or("");
        for href in main.split("href=\"").skip(1).filter_map(|rest| rest.split('"').next()) {
            if href.contains("://") || href.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = href.split_once('#').unwrap_or((href, ""));
            let target = if path.is_empty() { page.clone() } else { page.parent().unwrap_or(book).join(path) };
            let rel = page.strip_prefix(book).unwrap_or(page).display();
            match std::fs::read_to_string(&target) {
                Err(_) => broken.push(format!("{rel}: {href} (no such page)")),
                Ok(text) if !anchor.is_empty() && !text.contains(&format!("id=\"{anchor}\"")) => {
                    broken.push(format!("{rel}: {href} (no such heading)"))
                }
                Ok(_) => {}
            }
        }
    }
    broken
}

/// What the docs must not say: they describe the product as it is, not how it was made.
/// Each rule: a word or phrase (matched case-insensitively on word boundaries) and why.
#[cfg(test)]
const FORBIDDEN: &[(&str, &str)] = &[
    ("round", "a unit of the project's work, not of the product"),
    ("rounds", "a unit of the project's work, not of the product"),
    ("issue", "a work item; say what the product does"),
    ("seed 0", "a work item; say what the product does"),
    ("tests/it/", "a test file; say what is proven"),
    ("plan.md", "a document outside the repository"),
];

/// Every use of a [`FORBIDDEN`] word in the book or README.md, and every test named by
/// its function (`module::name_of_a_test`), as `file:line: what (why)`.
#[cfg(test)]
pub fn forbidden_words(root: &Path) -> Vec<String> {
    let mut files = pages(root);
    files.push(root.join("README.md"));
    let mut found = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        let rel = file.strip_prefix(root).unwrap_or(file).display().to_string();
        for (number, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            for (word, why) in FORBIDDEN {
                let hit = lower.match_indices(word).any(|(at, _)| {
                    let before = lower[..at].chars().next_back();
                    let after = lower[at + word.len()..].chars().next();
                    !before.is_some_and(|c| c.is_alphanumeric()) && !after.is_some_and(|c| c.is_alphanumeric())
                });
                if hit {
                    found.push(format!("{rel}:{}: {word:?} ({why})", number + 1));
                }
            }
            for code in line.split('`').skip(1).step_by(2) {
                let named_test = code.split_once("::").is_some_and(|(module, name)| {
                    module.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                        && name.matches('_').count() >= 3
                        && name.chars().all(|c| c.is_ascii_lowercase() || c == '_' || c == ':')
                });
                if named_test {
                    found.push(format!(
                        "{rel}:{}: `{code}` (a test by its function name; say what it proves)",
                        number + 1
                    ));
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_books_internal_links_resolve() {
        let broken = broken_links(&root());
        assert!(broken.is_empty(), "links that lead nowhere:\n{}", broken.join("\n"));
    }

    #[test]
    fn the_docs_describe_the_product_not_the_work() {
        let found = forbidden_words(&root());
        assert!(found.is_empty(), "words the docs must not use:\n{}", found.join("\n"));
    }

    #[test]
    fn readme_fits_a_newcomers_first_minutes() {
        let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
        let lines = readme.lines().count();
        assert!(lines <= 250, "README.md has {lines} lines (at most 250: the rest goes into the book in docs/)");
    }

    #[test]
    fn every_page_of_the_book_is_in_its_summary() {
        let root = root();
        let summary = std::fs::read_to_string(root.join("docs/src/SUMMARY.md")).expect("SUMMARY.md");
        let listed: BTreeSet<String> = link_targets(&summary).into_iter().map(|(_, target)| target).collect();
        for page in pages(&root) {
            let rel = page.strip_prefix(root.join("docs/src")).expect("under docs/src").display().to_string();
            assert!(rel == "SUMMARY.md" || listed.contains(&rel), "{rel} is not in docs/src/SUMMARY.md");
        }
    }

    #[test]
    fn heading_ids_follow_mdbook() {
        let ids = heading_ids("# The virtual sandbox (`vsh`, `mcp`)\n```sh\n# a comment\n```\n## Notes\n## Notes\n");
        assert_eq!(ids, BTreeSet::from(["the-virtual-sandbox-vsh-mcp".into(), "notes".into(), "notes-1".into()]));
    }

    #[test]
    fn links_are_found_outside_code_only() {
        let text = "See [a](a.md#x) and [b](../b.md).\n```\n[c](c.md)\n```\n[web](https://example.com)\n";
        assert_eq!(
            link_targets(text),
            [(1, "a.md#x".to_owned()), (1, "../b.md".to_owned()), (5, "https://example.com".to_owned())]
        );
    }
}
