//! The product's central sentence: what was refused, why, and what to do instead. Every
//! guard says it through [`sentence`]; the guards whose refusals carry only the why and
//! the instead (the hook guard, the push service and the brokers) use [`Refusal`].

use std::fmt;

/// Why something is refused, and what to do instead, each as a clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub why: String,
    pub instead: String,
}

/// A [`Refusal`] from its two clauses.
pub fn refuse(why: impl Into<String>, instead: impl Into<String>) -> Refusal {
    Refusal { why: why.into(), instead: instead.into() }
}

impl Refusal {
    /// `agent-sandbox: <what>: <why>.` and `Instead: <instead>.` on the next line.
    pub fn said(&self, what: &str) -> String {
        sentence(what, &self.why, &self.instead)
    }

    /// `<why>. Instead: <instead>.`, for a line that says more around it.
    pub fn inline(&self) -> String {
        format!("{}. Instead: {}.", self.why, self.instead)
    }
}

/// The refusal as it is printed: `agent-sandbox: <what>: <why>.\nInstead: <instead>.`
pub fn sentence(what: &str, why: &str, instead: &str) -> String {
    format!("agent-sandbox: {what}: {why}.\nInstead: {instead}.")
}

/// Pushes print as `agent-sandbox: push refused: …`.
impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.said("push refused"))
    }
}

impl std::error::Error for Refusal {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sentence_in_every_form() {
        let refusal = refuse("it skips the checks", "commit without --no-verify");
        assert_eq!(
            refusal.said("pre-commit refused"),
            "agent-sandbox: pre-commit refused: it skips the checks.\nInstead: commit without --no-verify."
        );
        assert_eq!(refusal.inline(), "it skips the checks. Instead: commit without --no-verify.");
        assert_eq!(refusal.to_string(), refusal.said("push refused"));
    }
}
