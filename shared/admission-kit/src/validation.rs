//! apimachinery's `util/validation` checks that several upstreams call, with its messages word
//! for word (v0.34): DNS-1035 labels and percent strings. Hand-written: no crate carries
//! apimachinery's texts, and the grammars are a few lines each.

/// The longest DNS-1035 label.
pub const DNS1035_LABEL_MAX_LENGTH: usize = 63;

/// `IsDNS1035Label`'s pattern message, with its examples and regex.
pub const DNS1035_LABEL_MESSAGE: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// `IsValidPercent`'s message.
pub const PERCENT_MESSAGE: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

/// Whether `value` matches `[a-z]([-a-z0-9]*[a-z0-9])?` (any length).
pub fn is_dns1035_label(value: &str) -> bool {
    let b = value.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_lowercase()
                && *last != b'-'
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        }
        _ => false,
    }
}

/// `IsDNS1035Label`: what is wrong with `value` as a DNS-1035 label, in apimachinery's order
/// (length first); empty when it is one.
pub fn dns1035_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1035_LABEL_MAX_LENGTH {
        errs.push(format!(
            "must be no more than {DNS1035_LABEL_MAX_LENGTH} characters"
        ));
    }
    if !is_dns1035_label(value) {
        errs.push(DNS1035_LABEL_MESSAGE.to_owned());
    }
    errs
}

/// `IsValidPercent`: whether `value` matches `^[0-9]+%$`.
pub fn is_valid_percent(value: &str) -> bool {
    value
        .strip_suffix('%')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1035_labels() {
        for ok in ["a", "my-name", "abc-123", "a1"] {
            assert!(dns1035_label_errors(ok).is_empty(), "{ok}");
        }
        for bad in ["", "1a", "a-", "A", "a_b", "a.b"] {
            assert_eq!(dns1035_label_errors(bad), [DNS1035_LABEL_MESSAGE], "{bad}");
        }
        let long = "a".repeat(64);
        assert_eq!(
            dns1035_label_errors(&long),
            ["must be no more than 63 characters"]
        );
        assert_eq!(dns1035_label_errors(&format!("{long}-")).len(), 2);
    }

    #[test]
    fn percents() {
        assert!(is_valid_percent("0%") && is_valid_percent("150%"));
        for bad in ["%", "5", "-5%", "5 %", "5%%", " 5%"] {
            assert!(!is_valid_percent(bad), "{bad}");
        }
    }
}
