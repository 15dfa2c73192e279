//! The shell's parser: one command line → a [`Script`] (lists joined by `;` or newlines,
//! `&&`/`||` chains, `|` pipelines, simple commands with `>`, `>>`, `2>`, `2>>`, `2>&1`).
//! Pure and total: any input gives a script or a [`SyntaxError`], never a panic (the
//! fuzz target and the `parser_never_panics` test hold it to that).
//!
//! Words keep their `$VAR` parts unexpanded: expansion happens when the command runs, so
//! `export A=1 && echo $A` sees the new value. Quoting follows POSIX sh: single quotes
//! are literal, double quotes expand variables and take `\` before `"`, `\`, `$` and a
//! backquote, a backslash outside quotes escapes any character. What this shell does not
//! have (`&`, `<`, subshells, command substitution) is a syntax error rather than a
//! silent surprise. Unquoted `*`, `?` and `[` become [`Part::Wildcard`]s, so that
//! pathname expansion knows which wildcards were quoted.
//!
//! A line usually holds one command of plain words, so the lists, pipelines and word
//! parts keep their first element inline: parsing such a line allocates only the
//! words' list and text.

use smallvec::{smallvec, SmallVec};

/// Command lines joined by `;` or newlines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub lists: SmallVec<[AndOr; 1]>,
}

/// Pipelines joined by `&&` and `||`, evaluated left to right.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AndOr {
    pub first: Pipeline,
    pub rest: Vec<(Connector, Pipeline)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connector {
    And,
    Or,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    pub commands: SmallVec<[SimpleCommand; 1]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// `>`/`>>` (stdout) or `2>`/`2>>` (stderr) to a file.
    File { stream: Stream, append: bool, target: Word },
    /// `2>&1`.
    StderrToStdout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One argument before expansion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Word {
    pub parts: SmallVec<[Part; 1]>,
    /// Whether any of it was quoted or escaped: an unquoted word that expands to
    /// nothing (`$UNSET`) is dropped, as sh does; `""` stays an empty argument.
    pub quoted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Literal(String),
    /// `$NAME` or `${NAME}`.
    Var(String),
    /// `$?`, the previous command's exit code.
    LastStatus,
    /// An unquoted `*`, `?` or `[`: the word is a pattern for pathname expansion.
    Wildcard(char),
}

impl Word {
    pub fn literal(text: &str) -> Word {
        Word { parts: smallvec![Part::Literal(text.to_owned())], quoted: false }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("syntax error: {message} (at character {offset})")]
pub struct SyntaxError {
    pub message: String,
    /// Character (not byte) offset into the command line.
    pub offset: usize,
}

pub fn parse(line: &str) -> Result<Script, SyntaxError> {
    match plain_words(line) {
        Some(script) => Ok(script),
        None => parse_tokens(line),
    }
}

/// The lexer and the parser proper, for any line.
fn parse_tokens(line: &str) -> Result<Script, SyntaxError> {
    let tokens = lex(line)?;
    Parser { tokens, pos: 0, end: line.chars().count() }.script()
}

/// The fast path for the commonest line, plain words and blanks (`ls -l src`): no
/// quoting, `$`, wildcards, operators, redirections, comments or line breaks. Such a
/// line is one simple command of literal words (or nothing), exactly what the lexer
/// would make of it, without lexing it char by char; `None` for any other line.
fn plain_words(line: &str) -> Option<Script> {
    // Every special char is ASCII, so the bytes of a multibyte char are never one.
    let blank = |byte: u8| matches!(byte, b' ' | b'\t' | b'\r');
    if !line.bytes().all(|byte| blank(byte) || !is_special(char::from(byte))) {
        return None;
    }
    let words: Vec<Word> = line.split([' ', '\t', '\r']).filter(|word| !word.is_empty()).map(Word::literal).collect();
    if words.is_empty() {
        return Some(Script { lists: SmallVec::new() });
    }
    let command = SimpleCommand { words, redirects: Vec::new() };
    Some(Script { lists: smallvec![AndOr { first: Pipeline { commands: smallvec![command] }, rest: Vec::new() }] })
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(Word),
    Semi,
    Newline,
    AndIf,
    OrIf,
    Pipe,
    Redirect { stream: Stream, append: bool },
    StderrToStdout,
}

fn error(message: impl Into<String>, offset: usize) -> SyntaxError {
    SyntaxError { message: message.into(), offset }
}

/// A word being built: its parts, whether anything (even `""`) started it, and whether
/// it is exactly the unquoted text `2` (which makes a following `>` a stderr redirect).
#[derive(Default)]
struct WordBuilder {
    word: Word,
    started: bool,
    quoted: bool,
}

impl WordBuilder {
    fn push_char(&mut self, ch: char) {
        self.push_str(&[ch]);
    }

    /// Appends literal text: a run at once, so that a word's text is allocated once.
    fn push_str(&mut self, chars: &[char]) {
        self.started = true;
        match self.word.parts.last_mut() {
            Some(Part::Literal(text)) => text.extend(chars),
            _ if chars.is_empty() => {}
            _ => self.word.parts.push(Part::Literal(chars.iter().collect())),
        }
    }

    fn push_part(&mut self, part: Part) {
        self.started = true;
        self.word.parts.push(part);
    }

    fn is_unquoted_two(&self) -> bool {
        !self.quoted && self.word.parts[..] == [Part::Literal(String::from("2"))]
    }

    fn finish(&mut self, tokens: &mut Vec<(Token, usize)>, offset: usize) {
        if self.started {
            let mut word = std::mem::take(&mut self.word);
            word.quoted = self.quoted;
            if word.parts.is_empty() {
                word.parts.push(Part::Literal(String::new()));
            }
            tokens.push((Token::Word(word), offset));
        }
        *self = WordBuilder::default();
    }
}

fn lex(line: &str) -> Result<Vec<(Token, usize)>, SyntaxError> {
    // Room for every char at once (a line has at most as many chars as bytes).
    let mut chars = Vec::with_capacity(line.len());
    chars.extend(line.chars());
    let mut tokens = Vec::new();
    let mut word = WordBuilder::default();
    let mut word_start = 0;
    let mut i = 0;
    while i < chars.len() {
        let ch = chars[i];
        if !word.started {
            word_start = i;
        }
        match ch {
            ' ' | '\t' | '\r' => {
                word.finish(&mut tokens, word_start);
                i += 1;
            }
            '\n' | ';' => {
                word.finish(&mut tokens, word_start);
                tokens.push((if ch == ';' { Token::Semi } else { Token::Newline }, i));
                i += 1;
            }
            '#' if !word.started => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '&' if chars.get(i + 1) == Some(&'&') => {
                word.finish(&mut tokens, word_start);
                tokens.push((Token::AndIf, i));
                i += 2;
            }
            '&' => return Err(error("background jobs (&) are not supported", i)),
            '|' if chars.get(i + 1) == Some(&'|') => {
                word.finish(&mut tokens, word_start);
                tokens.push((Token::OrIf, i));
                i += 2;
            }
            '|' => {
                word.finish(&mut tokens, word_start);
                tokens.push((Token::Pipe, i));
                i += 1;
            }
            '>' => {
                let stream = if word.is_unquoted_two() {
                    word = WordBuilder::default();
                    Stream::Stderr
                } else {
                    word.finish(&mut tokens, word_start);
                    Stream::Stdout
                };
                let append = chars.get(i + 1) == Some(&'>');
                let after = i + 1 + usize::from(append);
                if chars.get(after) == Some(&'&') {
                    if stream == Stream::Stderr && !append && chars.get(after + 1) == Some(&'1') {
                        tokens.push((Token::StderrToStdout, i));
                        i = after + 2;
                        continue;
                    }
                    return Err(error("only the descriptor duplication 2>&1 is supported", i));
                }
                tokens.push((Token::Redirect { stream, append }, i));
                i = after;
            }
            '<' => return Err(error("input redirection (<) is not supported", i)),
            '(' | ')' => return Err(error("subshells and ( ) are not supported", i)),
            '`' => return Err(error("command substitution (`...`) is not supported", i)),
            '\\' => {
                match chars.get(i + 1) {
                    Some('\n') => {}
                    Some(&next) => word.push_char(next),
                    None => word.push_char('\\'),
                }
                word.quoted = true;
                i += 2;
            }
            '\'' => {
                word.quoted = true;
                word.started = true;
                let close = chars[i + 1..]
                    .iter()
                    .position(|&c| c == '\'')
                    .ok_or_else(|| error("unterminated single quote", i))?;
                word.push_str(&chars[i + 1..i + 1 + close]);
                i += close + 2;
            }
            '"' => {
                word.quoted = true;
                word.started = true;
                let open = i;
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(error("unterminated double quote", open)),
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some('\\') => {
                            match chars.get(i + 1) {
                                Some(&next @ ('"' | '\\' | '$' | '`')) => word.push_char(next),
                                Some('\n') => {}
                                Some(&next) => {
                                    word.push_char('\\');
                                    word.push_char(next);
                                }
                                None => return Err(error("unterminated double quote", open)),
                            }
                            i += 2;
                        }
                        Some('`') => return Err(error("command substitution (`...`) is not supported", i)),
                        Some('$') => i = dollar(&chars, i, &mut word)?,
                        Some(&c) => {
                            word.push_char(c);
                            i += 1;
                        }
                    }
                }
            }
            '$' => i = dollar(&chars, i, &mut word)?,
            c @ ('*' | '?' | '[') => {
                word.push_part(Part::Wildcard(c));
                i += 1;
            }
            _ => {
                // This character and the ordinary ones after it (a `#` inside a word
                // is one of them).
                let len = chars[i + 1..].iter().take_while(|&&c| c == '#' || !is_special(c)).count();
                word.push_str(&chars[i..=i + len]);
                i += 1 + len;
            }
        }
    }
    word.finish(&mut tokens, word_start);
    Ok(tokens)
}

/// Whether the lexer's `match` has an arm of its own for `ch` (`#` only at the start
/// of a word).
fn is_special(ch: char) -> bool {
    matches!(
        ch,
        ' ' | '\t'
            | '\r'
            | '\n'
            | ';'
            | '#'
            | '&'
            | '|'
            | '>'
            | '<'
            | '('
            | ')'
            | '`'
            | '\\'
            | '\''
            | '"'
            | '$'
            | '*'
            | '?'
            | '['
    )
}

/// `$NAME`, `${NAME}`, `$?` or a lone `$` at `chars[i]`; returns the index after it.
fn dollar(chars: &[char], i: usize, word: &mut WordBuilder) -> Result<usize, SyntaxError> {
    let is_name_start = |c: char| c == '_' || c.is_ascii_alphabetic();
    let is_name = |c: char| c == '_' || c.is_ascii_alphanumeric();
    match chars.get(i + 1) {
        Some('?') => {
            word.push_part(Part::LastStatus);
            Ok(i + 2)
        }
        Some('(') => Err(error("command substitution $(...) is not supported", i)),
        Some('{') => {
            let close = chars[i + 2..].iter().position(|&c| c == '}').ok_or_else(|| error("missing } after ${", i))?;
            let name: String = chars[i + 2..i + 2 + close].iter().collect();
            if name == "?" {
                word.push_part(Part::LastStatus);
            } else if name.starts_with(is_name_start) && name.chars().all(is_name) {
                word.push_part(Part::Var(name));
            } else {
                return Err(error(format!("bad substitution ${{{name}}} (only ${{NAME}} is supported)"), i));
            }
            Ok(i + 3 + close)
        }
        Some(&c) if is_name_start(c) => {
            let len = chars[i + 1..].iter().take_while(|&&c| is_name(c)).count();
            word.push_part(Part::Var(chars[i + 1..i + 1 + len].iter().collect()));
            Ok(i + 1 + len)
        }
        _ => {
            word.push_char('$');
            Ok(i + 1)
        }
    }
}

/// Reads the tokens in order, never going back: a word is moved into the script,
/// not copied.
struct Parser {
    tokens: Vec<(Token, usize)>,
    pos: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos).map(|(token, _)| token)
    }

    fn offset(&self) -> usize {
        self.tokens.get(self.pos).map_or(self.end, |(_, offset)| *offset)
    }

    /// Takes the next token if it is a word (leaving an empty one behind: the parser
    /// never reads a token twice).
    fn next_word(&mut self) -> Option<Word> {
        match self.tokens.get_mut(self.pos) {
            Some((Token::Word(word), _)) => {
                let word = std::mem::take(word);
                self.pos += 1;
                Some(word)
            }
            _ => None,
        }
    }

    fn script(mut self) -> Result<Script, SyntaxError> {
        let mut lists = SmallVec::new();
        loop {
            while matches!(self.peek(), Some(Token::Semi | Token::Newline)) {
                self.pos += 1;
            }
            if self.peek().is_none() {
                return Ok(Script { lists });
            }
            lists.push(self.and_or()?);
            match self.peek() {
                None | Some(Token::Semi | Token::Newline) => {}
                Some(token) => return Err(error(format!("unexpected {}", describe(token)), self.offset())),
            }
        }
    }

    fn and_or(&mut self) -> Result<AndOr, SyntaxError> {
        let first = self.pipeline()?;
        let mut rest = Vec::new();
        loop {
            let connector = match self.peek() {
                Some(Token::AndIf) => Connector::And,
                Some(Token::OrIf) => Connector::Or,
                _ => return Ok(AndOr { first, rest }),
            };
            self.pos += 1;
            self.skip_newlines();
            rest.push((connector, self.pipeline()?));
        }
    }

    /// A line break may follow `&&`, `||` and `|`, as in sh.
    fn skip_newlines(&mut self) {
        while self.peek() == Some(&Token::Newline) {
            self.pos += 1;
        }
    }

    fn pipeline(&mut self) -> Result<Pipeline, SyntaxError> {
        let mut commands = smallvec![self.command()?];
        while self.peek() == Some(&Token::Pipe) {
            self.pos += 1;
            self.skip_newlines();
            commands.push(self.command()?);
        }
        Ok(Pipeline { commands })
    }

    fn command(&mut self) -> Result<SimpleCommand, SyntaxError> {
        let mut words = Vec::new();
        let mut redirects = Vec::new();
        loop {
            if let Some(word) = self.next_word() {
                words.push(word);
                continue;
            }
            match self.peek() {
                Some(&Token::Redirect { stream, append }) => {
                    self.pos += 1;
                    match self.next_word() {
                        Some(target) => redirects.push(Redirect::File { stream, append, target }),
                        None => {
                            return Err(match self.peek() {
                                Some(token) => error(
                                    format!("expected a file name after the redirection, found {}", describe(token)),
                                    self.offset(),
                                ),
                                None => error("expected a file name after the redirection", self.offset()),
                            })
                        }
                    }
                }
                Some(Token::StderrToStdout) => {
                    redirects.push(Redirect::StderrToStdout);
                    self.pos += 1;
                }
                _ => break,
            }
        }
        if words.is_empty() && redirects.is_empty() {
            return Err(match self.peek() {
                Some(token) => error(format!("unexpected {}", describe(token)), self.offset()),
                None => error("unexpected end of the command line", self.offset()),
            });
        }
        Ok(SimpleCommand { words, redirects })
    }
}

fn describe(token: &Token) -> &'static str {
    match token {
        Token::Word(_) => "word",
        Token::Semi => ";",
        Token::Newline => "line break",
        Token::AndIf => "&&",
        Token::OrIf => "||",
        Token::Pipe => "|",
        Token::Redirect { .. } => "redirection",
        Token::StderrToStdout => "2>&1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path gives the lexer's answer, or leaves the line to it.
    fn check_plain_words(line: &str) -> bool {
        let fast = plain_words(line);
        if let Some(script) = &fast {
            assert_eq!(Ok(script), parse_tokens(line).as_ref(), "{line:?}");
        }
        fast.is_some()
    }

    #[test]
    fn plain_words_is_the_parser_on_plain_lines_and_declines_the_rest() {
        for line in [
            "",
            " ",
            "\t\r ",
            "pwd",
            "echo hello",
            "  ls  -l\tsrc\r",
            "cd /d",
            "cat /d/f",
            "é ñ 中 🦀",
            "a=b c{d}e!f~g%h@i+j,k:l",
            "\0",
        ] {
            assert!(check_plain_words(line), "{line:?} is plain");
        }
        for line in [
            "echo x > /d/g",
            "a # comment",
            "#",
            "a;b",
            "a\nb",
            "a && b",
            "a | b",
            "a&",
            "'a'",
            "\"a\"",
            "a\\ b",
            "$A",
            "a*",
            "a?",
            "[a]",
            "a<b",
            "(a)",
            "`a`",
            "2>&1",
        ] {
            assert!(!check_plain_words(line), "{line:?} is not plain");
        }
        // Random lines over plain chars, blanks and every special char.
        let alphabet: Vec<char> = "ab2 \t\r\n;&|><()`\\'\"$?*[]{}#=-_/.1é中".chars().collect();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut plain = 0;
        for _ in 0..50_000 {
            let len = next() % 16;
            // Half of the lines draw from the plain part of the alphabet only.
            let pool = if next() % 2 == 0 { 6 } else { alphabet.len() as u64 };
            let line: String = (0..len).map(|_| alphabet[(next() % pool) as usize]).collect();
            plain += usize::from(check_plain_words(&line));
        }
        assert!(plain > 10_000, "only {plain} lines took the fast path");
    }
}
