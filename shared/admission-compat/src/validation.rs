//! apimachinery's `util/validation` checks that several upstreams call, with its messages word
//! for word (v0.34): DNS-1035 labels, DNS-1123 subdomains, HTTP paths and percent strings. Hand-written: no crate carries
//! apimachinery's texts, and the grammars are a few lines each.

/// The longest DNS-1035 label.
pub const DNS1035_LABEL_MAX_LENGTH: usize = 63;

/// `IsDNS1035Label`'s pattern message, with its examples and regex.
pub const DNS1035_LABEL_MESSAGE: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// The longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// `IsDNS1123Subdomain`'s pattern message, with its example and regex.
pub const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `IsDomainPrefixedPath`'s message for a path segment outside its alphabet.
pub const HTTP_PATH_MESSAGE: &str =
    "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')";

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

/// Whether `value` matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`.
pub fn is_dns1123_subdomain(value: &str) -> bool {
    value.split('.').all(|label| {
        let b = label.as_bytes();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                first.is_ascii_alphanumeric()
                    && !first.is_ascii_uppercase()
                    && last.is_ascii_alphanumeric()
                    && !last.is_ascii_uppercase()
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            }
            _ => false,
        }
    })
}

/// `IsDNS1123Subdomain`: what is wrong with `value` as a DNS-1123 subdomain, length first;
/// empty when it is one.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters"
        ));
    }
    if !is_dns1123_subdomain(value) {
        errs.push(DNS1123_SUBDOMAIN_MESSAGE.to_owned());
    }
    errs
}

/// Whether `value` matches `IsDomainPrefixedPath`'s path pattern `[A-Za-z0-9/\-._~%!$&'()*+,;=:]+`.
pub fn is_http_path(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&c))
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
    fn dns1123_subdomains_and_http_paths() {
        for ok in ["a", "acme.io", "0.a-b.c9", &"a".repeat(253)] {
            assert!(dns1123_subdomain_errors(ok).is_empty(), "{ok}");
        }
        for bad in ["", "A.io", "a..b", "-a", "a-", ".a", "a_b"] {
            assert_eq!(
                dns1123_subdomain_errors(bad),
                [DNS1123_SUBDOMAIN_MESSAGE],
                "{bad}"
            );
        }
        assert_eq!(dns1123_subdomain_errors(&"a".repeat(254)).len(), 1);
        assert!(is_http_path("foo/bar-1.~%!$&'()*+,;=:"));
        assert!(!is_http_path("") && !is_http_path("a b") && !is_http_path("a?b"));
    }

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
