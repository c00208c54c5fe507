//! Enforcement modes by name, and which endpoint runs in which (`--enforcement`): what an
//! endpoint does with its decisions is [`crate::review::enforcement`]'s.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// What an endpoint does with its decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, PartialOrd, Ord)]
pub enum Enforcement {
    /// Denials deny and patches are returned (the upstream's behaviour).
    #[default]
    Enforce,
    /// Every review is admitted; each would-be denial comes back as a warning, which `kubectl`
    /// prints. Patches are returned as in `Enforce`.
    Warn,
    /// Every review is admitted unchanged and without a word: would-be denials and patches are
    /// only counted and logged.
    Audit,
}

impl Enforcement {
    /// Every mode, in the order of the flag's help.
    pub const ALL: [Enforcement; 3] = [Self::Enforce, Self::Warn, Self::Audit];

    /// `enforce`, `warn` or `audit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Warn => "warn",
            Self::Audit => "audit",
        }
    }
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is none of `enforce`, `warn`, `audit`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown enforcement mode {0:?} (expected enforce, warn or audit)")]
pub struct UnknownMode(pub String);

impl FromStr for Enforcement {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownMode(s.to_owned()))
    }
}

/// Each endpoint's mode: one for the service, overridden per path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Modes {
    /// The service's mode.
    pub default: Enforcement,
    /// Paths whose mode differs.
    pub paths: BTreeMap<String, Enforcement>,
}

/// A `--enforcement` value that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModesError {
    /// The mode is unknown.
    #[error(transparent)]
    Mode(#[from] UnknownMode),
    /// A path that is not one of the service's endpoints.
    #[error("--enforcement names {0:?}, which this service does not serve (its paths: {1})")]
    UnknownPath(String, String),
    /// One path given two modes.
    #[error("--enforcement gives {0:?} two modes")]
    Repeated(String),
}

impl Modes {
    /// Reads `--enforcement` values: `MODE` (the service's mode) or `PATH=MODE` (one endpoint's),
    /// checking each path against `paths`, the service's endpoints. The last plain `MODE` wins, as
    /// a flag given twice does.
    pub fn parse<'a>(
        values: impl IntoIterator<Item = &'a str>,
        paths: &[&str],
    ) -> Result<Self, ModesError> {
        let mut modes = Self::default();
        for v in values {
            match v.split_once('=') {
                None => modes.default = v.trim().parse()?,
                Some((path, mode)) => {
                    let path = path.trim();
                    if !paths.contains(&path) {
                        return Err(ModesError::UnknownPath(path.to_owned(), paths.join(", ")));
                    }
                    if modes
                        .paths
                        .insert(path.to_owned(), mode.trim().parse()?)
                        .is_some()
                    {
                        return Err(ModesError::Repeated(path.to_owned()));
                    }
                }
            }
        }
        Ok(modes)
    }

    /// The mode of the endpoint at `path`.
    pub fn of(&self, path: &str) -> Enforcement {
        self.paths.get(path).copied().unwrap_or(self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_a_service_mode_and_per_path_modes() {
        let paths = ["/validate-a", "/mutate-a"];
        let m = Modes::parse(["audit", "/mutate-a=enforce"], &paths).unwrap();
        assert_eq!(m.of("/validate-a"), Enforcement::Audit);
        assert_eq!(m.of("/mutate-a"), Enforcement::Enforce);
        assert_eq!(Modes::parse([], &paths).unwrap(), Modes::default());
        assert_eq!(
            Modes::parse(["/nope=warn"], &paths)
                .unwrap_err()
                .to_string(),
            "--enforcement names \"/nope\", which this service does not serve (its paths: /validate-a, /mutate-a)"
        );
        assert_eq!(
            Modes::parse(["loud"], &paths).unwrap_err().to_string(),
            "unknown enforcement mode \"loud\" (expected enforce, warn or audit)"
        );
        assert!(matches!(
            Modes::parse(["/mutate-a=warn", "/mutate-a=audit"], &paths),
            Err(ModesError::Repeated(_))
        ));
    }
}
