//! `container.*`: the Docker sandbox's resource limits as a config file writes them
//! (`"50%"`, `1.5`, `"2g"`, `4096`, `"none"`), parsed here (pure) so that a mistake is
//! reported with its file, line and column; `dockerbox` turns a share into an amount
//! against the engine's totals.

/// One limit as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `"none"`: no limit.
    Unlimited,
    /// `"N%"`: a share of what the engine has (1 to 100).
    Percent(u32),
    /// Nano-CPUs for `cpus`, bytes for `memory` and `disk`, processes for `pids`.
    Amount(u64),
}

/// What a limit counts, which decides the forms it may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// CPUs, fractions allowed (`1.5`), or a share of the engine's (`"50%"`).
    Cpus,
    /// Bytes with an optional `k`, `m`, `g`, `t` suffix (powers of 1024), or a share of
    /// the engine's memory.
    Memory,
    /// Bytes as for memory; no share (the engine reports no disk total).
    Disk,
    /// A whole number.
    Count,
}

impl Unit {
    fn expected(self) -> &'static str {
        match self {
            Unit::Cpus => "a number of CPUs (1.5), a share of the engine's (\"50%\") or \"none\"",
            Unit::Memory => "a size (\"2g\", \"512m\"), a share of the engine's memory (\"50%\") or \"none\"",
            Unit::Disk => "a size (\"20g\") or \"none\"",
            Unit::Count => "a whole number or \"none\"",
        }
    }
}

/// Parses `text` as a limit counted in `unit`; the error says which forms are valid.
pub fn parse(text: &str, unit: Unit) -> Result<Limit, String> {
    let text = text.trim();
    let bad = || format!("expected {}, got {text:?}", unit.expected());
    if text == "none" {
        return Ok(Limit::Unlimited);
    }
    if let Some(percent) = text.strip_suffix('%') {
        if !matches!(unit, Unit::Cpus | Unit::Memory) {
            return Err(bad());
        }
        return match percent.parse::<u32>() {
            Ok(percent @ 1..=100) => Ok(Limit::Percent(percent)),
            _ => Err(bad()),
        };
    }
    let amount = match unit {
        Unit::Cpus => decimal(text, 1_000_000_000),
        Unit::Count => text.parse::<u64>().ok(),
        Unit::Memory | Unit::Disk => {
            let lower = text.to_ascii_lowercase();
            let number_end = lower.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(lower.len());
            let (number, suffix) = lower.split_at(number_end);
            let scale: u64 = match suffix.trim_start() {
                "" | "b" => 1,
                "k" | "kb" | "kib" => 1 << 10,
                "m" | "mb" | "mib" => 1 << 20,
                "g" | "gb" | "gib" => 1 << 30,
                "t" | "tb" | "tib" => 1 << 40,
                _ => return Err(bad()),
            };
            decimal(number, scale)
        }
    };
    match amount {
        Some(amount) if amount > 0 => Ok(Limit::Amount(amount)),
        _ => Err(bad()),
    }
}

/// `1.5` × `scale`, in integers (rounded down), for a plain decimal number.
fn decimal(text: &str, scale: u64) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = whole.chars().chain(fraction.chars());
    if whole.len() + fraction.len() == 0 || fraction.len() > 9 || !digits.clone().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let number: u128 = digits.collect::<String>().parse().ok()?;
    let amount = number.checked_mul(u128::from(scale))? / 10u128.pow(fraction.len() as u32);
    u64::try_from(amount).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_in_the_forms_each_unit_allows() {
        let gib = 1u64 << 30;
        let table: &[(&str, Unit, Result<Limit, ()>)] = &[
            ("none", Unit::Cpus, Ok(Limit::Unlimited)),
            ("50%", Unit::Cpus, Ok(Limit::Percent(50))),
            ("1.5", Unit::Cpus, Ok(Limit::Amount(1_500_000_000))),
            ("2", Unit::Cpus, Ok(Limit::Amount(2_000_000_000))),
            (".25", Unit::Cpus, Ok(Limit::Amount(250_000_000))),
            ("0", Unit::Cpus, Err(())),
            ("0%", Unit::Cpus, Err(())),
            ("101%", Unit::Cpus, Err(())),
            ("two", Unit::Cpus, Err(())),
            ("-1", Unit::Cpus, Err(())),
            ("2g", Unit::Memory, Ok(Limit::Amount(2 * gib))),
            ("1.5G", Unit::Memory, Ok(Limit::Amount(3 * gib / 2))),
            ("512MiB", Unit::Memory, Ok(Limit::Amount(512 << 20))),
            ("64 m", Unit::Memory, Ok(Limit::Amount(64 << 20))),
            ("1048576", Unit::Memory, Ok(Limit::Amount(1 << 20))),
            ("25%", Unit::Memory, Ok(Limit::Percent(25))),
            ("2x", Unit::Memory, Err(())),
            ("g", Unit::Memory, Err(())),
            ("20g", Unit::Disk, Ok(Limit::Amount(20 * gib))),
            ("50%", Unit::Disk, Err(())),
            ("4096", Unit::Count, Ok(Limit::Amount(4096))),
            ("none", Unit::Count, Ok(Limit::Unlimited)),
            ("1.5", Unit::Count, Err(())),
            ("10%", Unit::Count, Err(())),
        ];
        for (text, unit, want) in table {
            assert_eq!(parse(text, *unit).map_err(|_| ()), *want, "{text} as {unit:?}");
        }
        assert_eq!(parse("lots", Unit::Count), Err("expected a whole number or \"none\", got \"lots\"".to_owned()));
    }
}
