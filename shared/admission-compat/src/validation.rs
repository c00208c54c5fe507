//! apimachinery's `util/validation` checks that several upstreams call, with its messages word
//! for word (v0.34): DNS-1035 labels, DNS-1123 labels and subdomains, qualified names, label values, port names and numbers, HTTP paths and percent strings. Hand-written: no crate carries
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

/// The longest DNS-1123 label, label value, qualified name's name part.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;

/// `IsDNS1123Label`'s pattern message.
pub const DNS1123_LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// `IsDNS1123Label`: what is wrong with `value` as a DNS-1123 label, length first (a valid
/// subdomain is told it must not contain dots); empty when it is one.
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(format!(
            "must be no more than {DNS1123_LABEL_MAX_LENGTH} characters"
        ));
    }
    if value.contains('.') || !is_dns1123_subdomain(value) {
        errs.push(if is_dns1123_subdomain(value) {
            "must not contain dots".to_owned()
        } else {
            DNS1123_LABEL_MESSAGE.to_owned()
        });
    }
    errs
}

/// Whether `value` matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`: a qualified name's name
/// part and a non-empty label value.
fn is_label_name(value: &str) -> bool {
    let b = value.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
        }
        _ => false,
    }
}

const QUALIFIED_NAME_PATTERN: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `IsQualifiedName`: what is wrong with `value` as a label or annotation key (an optional
/// DNS-1123 subdomain prefix and `/`, then a name of at most 63 characters); empty when it is one.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_PATTERN} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(format!(
            "name part must be no more than {DNS1123_LABEL_MAX_LENGTH} characters"
        ));
    }
    if !name.is_empty() && !is_label_name(name) {
        errs.push(format!("name part {QUALIFIED_NAME_PATTERN}"));
    }
    errs
}

/// `IsValidLabelValue`: what is wrong with `value` as a label value (empty, or at most 63
/// characters of the name part's alphabet); empty when it is one.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(format!(
            "must be no more than {DNS1123_LABEL_MAX_LENGTH} characters"
        ));
    }
    if !value.is_empty() && !is_label_name(value) {
        errs.push("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_owned());
    }
    errs
}

/// `IsValidPortNum`'s message.
pub const PORT_NUMBER_MESSAGE: &str = "must be between 1 and 65535, inclusive";

/// `IsValidPortName` (an IANA service name): what is wrong with `value`, in apimachinery's
/// order; empty when it is one.
pub fn port_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 15 {
        errs.push("must be no more than 15 characters".to_owned());
    }
    if !value
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_owned(),
        );
    }
    if value.contains("--") {
        errs.push("must not contain consecutive hyphens (-)".to_owned());
    }
    if value.starts_with('-') || value.ends_with('-') {
        errs.push("must not begin or end with a hyphen (-)".to_owned());
    }
    if !value.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_owned());
    }
    errs
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
    fn dns1123_labels_say_dots_when_the_value_is_a_subdomain() {
        assert!(dns1123_label_errors("web-1").is_empty());
        assert_eq!(dns1123_label_errors("team.a"), ["must not contain dots"]);
        assert_eq!(dns1123_label_errors("Team-A"), [DNS1123_LABEL_MESSAGE]);
        assert_eq!(dns1123_label_errors(&"a".repeat(64)).len(), 1);
    }

    #[test]
    fn qualified_names_and_label_values() {
        for ok in ["team", "example.com/team", "a_b.C-9", "kubernetes.io/os"] {
            assert!(qualified_name_errors(ok).is_empty(), "{ok}");
        }
        assert!(qualified_name_errors("-team")[0].starts_with("name part must consist"));
        assert!(
            qualified_name_errors("Example_com/team")[0]
                .starts_with("prefix part a lowercase RFC 1123 subdomain")
        );
        assert!(qualified_name_errors("a/b/c")[0].starts_with("a qualified name must consist"));
        assert_eq!(
            qualified_name_errors("/a"),
            ["prefix part must be non-empty"]
        );
        assert_eq!(qualified_name_errors(""), ["name part must be non-empty"]);
        for ok in ["", "a", "My_value.1", &"v".repeat(63)] {
            assert!(label_value_errors(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            label_value_errors(&"v".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert!(label_value_errors("a b")[0].starts_with("a valid label must be"));
    }

    #[test]
    fn port_names() {
        assert!(port_name_errors("http").is_empty() && port_name_errors("h2c-8080").is_empty());
        assert_eq!(port_name_errors("HTTP").len(), 2);
        assert_eq!(
            port_name_errors("abcdefghijklmnop"),
            ["must be no more than 15 characters"]
        );
        assert_eq!(
            port_name_errors("a--b"),
            ["must not contain consecutive hyphens (-)"]
        );
        assert_eq!(
            port_name_errors("80"),
            ["must contain at least one letter (a-z)"]
        );
    }

    #[test]
    fn percents() {
        assert!(is_valid_percent("0%") && is_valid_percent("150%"));
        for bad in ["%", "5", "-5%", "5 %", "5%%", " 5%"] {
            assert!(!is_valid_percent(bad), "{bad}");
        }
    }
}
