//! A re-implementation of git's `parse-options.c` (git 2.47) for the few commands the
//! guard has to understand: option tables written as the option column of
//! `git <cmd> --help-all` (see [`table`]), and [`parse`], which walks an argument list the
//! way `parse_options()` does (bundled short flags, attached and detached values, `--`,
//! `--end-of-options`, unique-prefix abbreviations of long options, `--no-` negation) and
//! reports every option it recognised, in order, so a rule can apply "last one wins".

/// Whether an option takes a value, as git's help column shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArgKind {
    /// `--all`: no value.
    None,
    /// `--file <file>`, `-m <message>`: the rest of a short bundle, `--opt=value`, or the
    /// next argument, whatever it looks like.
    Required,
    /// `--gpg-sign[=<key-id>]`, `-S[<keyid>]`: only an attached value (`=value` for the long
    /// form, the rest of the bundle for the short one); never the next argument.
    Optional,
}

/// One entry of an option table.
#[derive(Clone, Debug)]
pub(crate) struct Opt {
    pub(crate) short: Option<char>,
    /// The long name as declared in git's table (`no-verify` is declared with its `no-`).
    pub(crate) long: Option<&'static str>,
    pub(crate) arg: ArgKind,
    /// `false` for `PARSE_OPT_NONEG` options, which have no `--no-` form.
    pub(crate) negatable: bool,
    /// The name rules match on: the long name, or `-x` for a short-only option.
    pub(crate) key: &'static str,
}

/// What [`parse`] saw, in command-line order.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub(crate) events: Vec<Event>,
    pub(crate) positionals: Vec<String>,
}

#[derive(Debug)]
pub(crate) enum Event {
    /// A recognised option. `unset` is the `--no-` sense (for an option declared as
    /// `no-verify`, `--verify` is `unset`). `token` is the argument as typed (`-anm`).
    Opt { key: &'static str, unset: bool, value: Option<String>, token: String },
    /// An abbreviation matching several options: git refuses it ("ambiguous option").
    /// `candidates` are `(key, unset)` pairs.
    Ambiguous { candidates: Vec<(&'static str, bool)>, token: String },
    /// An option missing from the table: git refuses it ("unknown option"). The walk goes
    /// on anyway, so a missing table entry can only make the guard stricter.
    Unknown,
}

/// Builds a table from the option column of `git <cmd> --help-all`, one entry per line:
/// `-m, --[no-]message <message>`, `-n, --no-verify`, `-S, --[no-]gpg-sign[=<key-id>]`,
/// `-C <n>`, `-n[<n>]`, `--ff-only`. A line `--x` right after `--no-x` is git's
/// "opposite of --no-x" line: it marks `no-x` as negatable and adds no entry.
///
/// Panics on a line it cannot read: the tables are constants, checked by the unit tests.
pub(crate) fn table(heads: &[&'static str]) -> Vec<Opt> {
    let mut opts: Vec<Opt> = Vec::with_capacity(heads.len());
    for head in heads {
        let opt = parse_head(head);
        if let (Some(long), None, ArgKind::None, false) = (opt.long, opt.short, opt.arg, opt.negatable) {
            if let Some(previous) = opts.last_mut() {
                if previous.long.and_then(|name| name.strip_prefix("no-")) == Some(long) {
                    previous.negatable = true;
                    continue;
                }
            }
        }
        opts.push(opt);
    }
    opts
}

fn parse_head(head: &'static str) -> Opt {
    let mut rest = head;
    let mut short = None;
    if rest.starts_with('-') && !rest.starts_with("--") {
        let c = rest[1..].chars().next().unwrap_or_else(|| panic!("bad option head {head:?}"));
        short = Some(c);
        let key = &head[..1 + c.len_utf8()];
        rest = &rest[1 + c.len_utf8()..];
        match rest.strip_prefix(", ") {
            Some(long_part) => rest = long_part,
            None => return Opt { short, long: None, arg: arg_kind(rest, head), negatable: false, key },
        }
    }
    let Some(mut long_part) = rest.strip_prefix("--") else {
        panic!("bad option head {head:?}");
    };
    let negatable = match long_part.strip_prefix("[no-]") {
        Some(stripped) => {
            long_part = stripped;
            true
        }
        None => false,
    };
    let name_len = long_part.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).unwrap_or(long_part.len());
    let (name, spec) = long_part.split_at(name_len);
    Opt { short, long: Some(name), arg: arg_kind(spec, head), negatable, key: name }
}

fn arg_kind(spec: &str, head: &str) -> ArgKind {
    if spec.is_empty() {
        ArgKind::None
    } else if spec.starts_with('[') {
        ArgKind::Optional
    } else if spec.starts_with(' ') {
        ArgKind::Required
    } else {
        panic!("bad option head {head:?}")
    }
}

/// Walks `args` (the arguments after the subcommand) like `parse_options()`.
/// `stop_at_non_option` is `PARSE_OPT_STOP_AT_NON_OPTION` (`git config`); otherwise
/// options and operands may be mixed, as for most commands.
pub(crate) fn parse(table: &[Opt], args: &[String], stop_at_non_option: bool) -> Parsed {
    let mut parsed = Parsed::default();
    let mut idx = 0;
    while idx < args.len() {
        let arg = &args[idx];
        idx += 1;
        if !arg.starts_with('-') || arg == "-" {
            parsed.positionals.push(arg.clone());
            if stop_at_non_option {
                parsed.positionals.extend(args[idx..].iter().cloned());
                break;
            }
            continue;
        }
        if arg == "--" || arg == "--end-of-options" {
            parsed.positionals.extend(args[idx..].iter().cloned());
            break;
        }
        if let Some(body) = arg.strip_prefix("--") {
            let event = match resolve_long(table, body) {
                Long::One { opt, unset, value } => {
                    let value = match (opt.arg, unset, value) {
                        (ArgKind::Required, false, None) => {
                            let next = args.get(idx).cloned();
                            if next.is_some() {
                                idx += 1;
                            }
                            next
                        }
                        (_, _, value) => value,
                    };
                    Event::Opt { key: opt.key, unset, value, token: arg.clone() }
                }
                Long::Ambiguous(candidates) => Event::Ambiguous { candidates, token: arg.clone() },
                Long::Unknown => Event::Unknown,
            };
            parsed.events.push(event);
            continue;
        }
        // A bundle of short options: `-anm`, `-mmsg`, `-Sn`.
        let bundle = &arg[1..];
        for (pos, c) in bundle.char_indices() {
            let Some(opt) = table.iter().find(|opt| opt.short == Some(c)) else {
                parsed.events.push(Event::Unknown);
                continue;
            };
            let attached = &bundle[pos + c.len_utf8()..];
            let value = match opt.arg {
                ArgKind::None => None,
                ArgKind::Optional => Some(attached.to_owned()).filter(|value| !value.is_empty()),
                ArgKind::Required if !attached.is_empty() => Some(attached.to_owned()),
                ArgKind::Required => {
                    let next = args.get(idx).cloned();
                    if next.is_some() {
                        idx += 1;
                    }
                    next
                }
            };
            parsed.events.push(Event::Opt { key: opt.key, unset: false, value, token: arg.clone() });
            if opt.arg != ArgKind::None {
                break;
            }
        }
    }
    parsed
}

enum Long<'t> {
    One { opt: &'t Opt, unset: bool, value: Option<String> },
    Ambiguous(Vec<(&'static str, bool)>),
    Unknown,
}

/// `parse_long_opt()` of git 2.47: exact match first; else every option the text
/// abbreviates (also in its `--no-` sense, and `--n`, `--no`, `--no-` abbreviate the
/// negation of every negatable option); one candidate wins, several are ambiguous.
/// Entries declared with a `no-` prefix are the negation of their stem, so `--verify`
/// is `no-verify` unset and `--no-no-verify` is the same.
fn resolve_long<'t>(table: &'t [Opt], body: &str) -> Long<'t> {
    let (name_part, value) = match body.split_once('=') {
        Some((name, value)) => (name, Some(value.to_owned())),
        None => (body, None),
    };
    let mut start = name_part;
    let mut arg_unset = false;
    let mut no_no = false;
    if let Some(rest) = start.strip_prefix("no-") {
        match rest.strip_prefix("no-") {
            Some(rest) => {
                start = rest;
                no_no = true;
            }
            None => {
                start = rest;
                arg_unset = true;
            }
        }
    }
    let mut candidates: Vec<(&'t Opt, bool)> = Vec::new();
    for opt in table {
        let Some(long) = opt.long else { continue };
        let (stem, declared_negative) = match long.strip_prefix("no-") {
            Some(stem) => (stem, true),
            None if no_no => continue,
            None => (long, false),
        };
        let unset = arg_unset ^ declared_negative;
        if unset && !opt.negatable {
            continue;
        }
        if start == stem {
            return Long::One { opt, unset, value };
        }
        if stem.starts_with(start) {
            candidates.push((opt, unset));
        }
        if opt.negatable && "no-".starts_with(body) {
            candidates.push((opt, !declared_negative));
        }
    }
    match candidates.as_slice() {
        [] => Long::Unknown,
        [(opt, unset)] => Long::One { opt, unset: *unset, value },
        _ => Long::Ambiguous(candidates.iter().map(|(opt, unset)| (opt.key, *unset)).collect()),
    }
}
