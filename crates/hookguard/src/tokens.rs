//! Secrets in content: finds private key blocks and well-known credential formats in
//! text (the lines a commit adds), without a regex engine. Each format is a literal
//! prefix followed by a run of allowed characters of a minimum length, which is how the
//! issuers document them; a hit reports the line and the kind, never the secret itself.

/// One credential found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// 1-based line number within the text scanned.
    pub line: usize,
    pub kind: &'static str,
}

struct Format {
    kind: &'static str,
    prefix: &'static str,
    /// Characters allowed after the prefix.
    charset: fn(u8) -> bool,
    min_len: usize,
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}
fn upper_alnum(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}
fn token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

const FORMATS: &[Format] = &[
    Format { kind: "AWS access key id", prefix: "AKIA", charset: upper_alnum, min_len: 16 },
    Format { kind: "AWS access key id", prefix: "ASIA", charset: upper_alnum, min_len: 16 },
    Format { kind: "GitHub token", prefix: "ghp_", charset: alnum, min_len: 36 },
    Format { kind: "GitHub token", prefix: "gho_", charset: alnum, min_len: 36 },
    Format { kind: "GitHub token", prefix: "ghu_", charset: alnum, min_len: 36 },
    Format { kind: "GitHub token", prefix: "ghs_", charset: alnum, min_len: 36 },
    Format { kind: "GitHub token", prefix: "ghr_", charset: alnum, min_len: 36 },
    Format { kind: "GitHub token", prefix: "github_pat_", charset: token, min_len: 60 },
    Format { kind: "GitLab token", prefix: "glpat-", charset: token, min_len: 20 },
    Format { kind: "Anthropic API key", prefix: "sk-ant-", charset: token, min_len: 40 },
    Format { kind: "OpenAI API key", prefix: "sk-proj-", charset: token, min_len: 40 },
    Format { kind: "OpenAI API key", prefix: "sk-svcacct-", charset: token, min_len: 40 },
    Format { kind: "Slack token", prefix: "xoxb-", charset: token, min_len: 20 },
    Format { kind: "Slack token", prefix: "xoxp-", charset: token, min_len: 20 },
    Format { kind: "Slack token", prefix: "xoxa-", charset: token, min_len: 20 },
    Format { kind: "Stripe secret key", prefix: "sk_live_", charset: alnum, min_len: 24 },
    Format { kind: "Stripe secret key", prefix: "rk_live_", charset: alnum, min_len: 24 },
    Format { kind: "Google API key", prefix: "AIza", charset: token, min_len: 35 },
    Format { kind: "npm token", prefix: "npm_", charset: alnum, min_len: 36 },
    Format { kind: "PyPI token", prefix: "pypi-AgEIcHlwaS5vcmc", charset: token, min_len: 50 },
    Format { kind: "Hugging Face token", prefix: "hf_", charset: alnum, min_len: 34 },
];

/// Every credential in `text`, in order of appearance.
pub fn find(text: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        if line.contains("-----BEGIN") && line.contains("PRIVATE KEY") && !line.contains("PUBLIC") {
            findings.push(Finding { line: idx + 1, kind: "private key" });
            continue;
        }
        if let Some(kind) = find_token(line.as_bytes()) {
            findings.push(Finding { line: idx + 1, kind });
        }
    }
    findings
}

/// One pass over the line: only where a token can start (a word boundary, on the first
/// byte of some prefix) are the formats tried. Big commits are scanned whole, so this is
/// on the pre-commit guard's critical path.
fn find_token(line: &[u8]) -> Option<&'static str> {
    for at in 0..line.len() {
        if at > 0 && token(line[at - 1]) {
            continue; // `xAKIA…` is not an AWS key id
        }
        let first = line[at];
        for format in FORMATS {
            let prefix = format.prefix.as_bytes();
            if prefix[0] != first || !line[at..].starts_with(prefix) {
                continue;
            }
            let run = line[at + prefix.len()..].iter().take_while(|b| (format.charset)(**b)).count();
            if run >= format.min_len {
                return Some(format.kind);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_found_and_lookalikes_are_not() {
        let cases: &[(&str, Option<&str>)] = &[
            ("-----BEGIN RSA PRIVATE KEY-----", Some("private key")),
            ("-----BEGIN OPENSSH PRIVATE KEY-----", Some("private key")),
            ("  key = \"-----BEGIN EC PRIVATE KEY-----\\nMHc…\"", Some("private key")),
            ("-----BEGIN PUBLIC KEY-----", None),
            ("-----BEGIN CERTIFICATE-----", None),
            ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", Some("AWS access key id")),
            ("AKIA-not-a-key", None),
            ("const KAKIAIOSFODNN7EXAMPLE = 1", None),
            ("token: ghp_0123456789abcdefghijABCDEFGHIJ012345", Some("GitHub token")),
            ("ghp_short", None),
            ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV", Some("GitHub token")),
            ("ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCD", Some("Anthropic API key")),
            ("OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH", Some("OpenAI API key")),
            ("slack = xoxb-123456789012-abcdefghijkl", Some("Slack token")),
            ("stripe = sk_live_abcdefghijklmnopqrstuvwx", Some("Stripe secret key")),
            ("stripe = sk_test_abcdefghijklmnopqrstuvwx", None),
            ("maps = AIzaSyA-abcdefghijklmnopqrstuvwxyz12345", Some("Google API key")),
            ("//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789", Some("npm token")),
            ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", Some("Hugging Face token")),
            ("let key = process.env.API_KEY;", None),
            ("# never commit ghp_ tokens or AKIA keys", None),
            ("", None),
        ];
        for (line, expected) in cases {
            let found = find(line);
            assert_eq!(found.first().map(|f| f.kind), *expected, "{line:?}");
        }
    }

    #[test]
    fn findings_carry_line_numbers() {
        let text = "fn main() {}\n// ok\nlet k = \"AKIAIOSFODNN7EXAMPLE\";\n-----BEGIN PRIVATE KEY-----\n";
        assert_eq!(
            find(text),
            [Finding { line: 3, kind: "AWS access key id" }, Finding { line: 4, kind: "private key" }]
        );
    }
}
