//! The overload statuses as an operator writes them (`--overload-status 429,503,502,504`,
//! the settings hash's `overload_status`): a comma-separated list of HTTP statuses.

use super::error::{LimiterError, check};

/// Refuses a status outside 100..=599: the one range check of an overload status, for the
/// parser here and [`super::AimdConfig::validate`].
pub(crate) fn check_status(st: u16) -> Result<(), LimiterError> {
    check(
        (100..=599).contains(&st),
        "overload status",
        "between 100 and 599",
        st,
    )
}

/// HTTP statuses that mean "overloaded" (see [`super::AimdConfig::overload_status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverloadStatus(pub Vec<u16>);

impl std::str::FromStr for OverloadStatus {
    type Err = LimiterError;

    /// `429,503,502,504`: statuses 100 to 599, each once (order kept).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || LimiterError::Parse {
            what: "overload statuses",
            value: s.to_owned(),
            hint: "write HTTP statuses separated by commas, like 429,503,502,504",
        };
        let mut list = Vec::new();
        for part in s.split(',') {
            let st: u16 = part.trim().parse().map_err(|_| bad())?;
            check_status(st)?;
            if !list.contains(&st) {
                list.push(st);
            }
        }
        Ok(Self(list))
    }
}

impl std::fmt::Display for OverloadStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u16::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_print_back() {
        let s: OverloadStatus = " 429, 503,502,504,429".parse().unwrap();
        assert_eq!(s, OverloadStatus(vec![429, 503, 502, 504]));
        assert_eq!(s.to_string(), "429,503,502,504");
        let e = "429,abc".parse::<OverloadStatus>().unwrap_err().to_string();
        assert!(e.contains("like 429,503,502,504"), "{e}");
        let e = "429,700".parse::<OverloadStatus>().unwrap_err().to_string();
        assert_eq!(e, "overload status must be between 100 and 599 (got 700)");
        assert!("".parse::<OverloadStatus>().is_err());
    }
}
