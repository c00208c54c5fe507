//! Go's `url.ParseRequestURI`: whether a string is an absolute URI or an absolute path as Go's
//! `net/url` reads a request's URI, with Go's error text. The API server checks a CRD field of
//! `format: uri` with it (kube-openapi's `strfmt`).
//!
//! Hand-written rather than the `url` crate: that one follows the WHATWG URL standard, which
//! accepts what Go refuses (`relative/path` against a base, spaces in a host it percent-encodes)
//! and refuses what Go accepts (`mongodb://h1:1,h2:2/db`); the refusals must be Go's.

/// Why Go's `url.ParseRequestURI(raw)` fails, in Go's words (`parse "x": invalid URI for
/// request`), or `Ok` when it parses.
pub fn parse_request_uri(raw: &str) -> Result<(), String> {
    parse(raw).map_err(|why| format!("parse {}: {why}", super::go_quote(raw)))
}

fn parse(raw: &str) -> Result<(), String> {
    if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    if raw.is_empty() {
        return Err("empty url".into());
    }
    if raw == "*" {
        return Ok(());
    }
    let (scheme, rest) = scheme(raw)?;
    let scheme = scheme.to_ascii_lowercase();
    // The query is not checked: only split off.
    let rest = if rest.ends_with('?') && rest.matches('?').count() == 1 {
        &rest[..rest.len() - 1]
    } else {
        rest.split_once('?').map_or(rest, |(r, _)| r)
    };
    if !rest.starts_with('/') {
        // `scheme:opaque` is a URI; without a scheme only an absolute path is a request's URI.
        return if scheme.is_empty() {
            Err("invalid URI for request".into())
        } else {
            Ok(())
        };
    }
    let mut path = rest;
    if !scheme.is_empty()
        && let Some(after) = rest.strip_prefix("//")
    {
        let (authority, p) = after.find('/').map_or((after, ""), |i| after.split_at(i));
        self::authority(&scheme, authority)?;
        path = p;
    }
    unescape(path, Mode::Path)
}

/// Go's `getScheme`: the scheme before the first `:`, or none when a character that cannot be
/// in a scheme comes first.
fn scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

fn authority(scheme: &str, authority: &str) -> Result<(), String> {
    let (userinfo, host) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    self::host(scheme, host)?;
    let Some(userinfo) = userinfo else {
        return Ok(());
    };
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c);
    if !userinfo.chars().all(allowed) {
        return Err("net/url: invalid userinfo".into());
    }
    match userinfo.split_once(':') {
        Some((user, password)) => {
            unescape(user, Mode::Other)?;
            unescape(password, Mode::Other)
        }
        None => unescape(userinfo, Mode::Other),
    }
}

fn host(scheme: &str, host: &str) -> Result<(), String> {
    match host.rfind('[') {
        Some(i) if i > 0 => return Err("invalid IP-literal".into()),
        Some(_) => {
            let Some(close) = host.rfind(']') else {
                return Err("missing ']' in host".into());
            };
            let port = &host[close + 1..];
            if !valid_optional_port(port) {
                return Err(format!("invalid port {} after host", super::go_quote(port)));
            }
            let literal = &host[1..close];
            let address = match literal.find("%25") {
                Some(zone) => {
                    unescape(&literal[..zone], Mode::Host)?;
                    unescape(&literal[zone..], Mode::Zone)?;
                    &literal[..zone]
                }
                None => {
                    unescape(literal, Mode::Host)?;
                    literal
                }
            };
            // Only an IPv6 address goes in brackets (an IPv4-mapped one included).
            return match address.parse::<std::net::Ipv6Addr>() {
                Ok(_) => Ok(()),
                Err(_) if address.parse::<std::net::Ipv4Addr>().is_ok() => {
                    Err("invalid IP-literal".into())
                }
                Err(_) => Err(format!(
                    "invalid host: ParseAddr({}): unable to parse IP",
                    super::go_quote(address)
                )),
            };
        }
        None => {}
    }
    if let Some(first) = host.find(':') {
        // Go holds http and https hosts to one colon; other schemes (a database's list of
        // hosts) take the port after the last.
        let at = if scheme == "http" || scheme == "https" {
            first
        } else {
            host.rfind(':').unwrap_or(first)
        };
        let port = &host[at..];
        if !valid_optional_port(port) {
            return Err(format!("invalid port {} after host", super::go_quote(port)));
        }
    }
    unescape(host, Mode::Host)
}

/// Empty, or `:` and digits.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    Other,
}

/// The ASCII characters a host may hold as they are.
fn host_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!$&'()*+,;=:[]<>\"-_.~".contains(&c)
}

/// Go's `unescape`, for its errors only: a `%` not followed by two hex digits; in a host, an
/// ASCII character a host cannot hold, or one written `%XX` (only bytes above 0x7f may be).
fn unescape(s: &str, mode: Mode) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |j: usize| b.get(j).is_some_and(u8::is_ascii_hexdigit);
            if !hex(i + 1) || !hex(i + 2) {
                let end = (i + 3).min(b.len());
                return Err(escape_error(&s[i..end]));
            }
            let value = u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap_or(0);
            let escaped = &s[i..i + 3];
            if mode == Mode::Host && value < 0x80 && escaped != "%25" {
                return Err(escape_error(escaped));
            }
            if mode == Mode::Zone && escaped != "%25" && value != b' ' && !host_char(value) {
                return Err(escape_error(escaped));
            }
            i += 3;
        } else {
            if matches!(mode, Mode::Host | Mode::Zone) && b[i] < 0x80 && !host_char(b[i]) {
                return Err(format!(
                    "invalid character {} in host name",
                    super::go_quote(&s[i..i + 1])
                ));
            }
            i += 1;
        }
    }
    Ok(())
}

fn escape_error(s: &str) -> String {
    format!("invalid URL escape {}", super::go_quote(s))
}

#[cfg(test)]
mod tests {
    /// Go 1.26's answers (`url.ParseRequestURI`), recorded with a Go program on this machine.
    #[test]
    fn answers_as_go_does() {
        let cases = [
            ("http://prometheus.monitoring.svc:9090", "ok"),
            ("::not a uri", "missing protocol scheme"),
            ("relative/path", "invalid URI for request"),
            ("/abs/path", "ok"),
            ("*", "ok"),
            ("", "empty url"),
            ("http://a b.com/", "invalid character \" \" in host name"),
            ("http://[::1]:80/x", "ok"),
            ("http://[::1]x/", "invalid port \"x\" after host"),
            ("http://[1.2.3.4]/", "invalid IP-literal"),
            ("http://host:80:90/", "invalid port \":80:90\" after host"),
            ("mongodb://h1:1,h2:2/db", "ok"),
            ("http://user@host/", "ok"),
            ("http://us er@host/", "net/url: invalid userinfo"),
            ("http://host/%zz", "invalid URL escape \"%zz\""),
            ("http://host/%41", "ok"),
            ("http://h%41st/", "invalid URL escape \"%41\""),
            ("http://h%C3%A9st/", "ok"),
            ("http://host/a#frag", "ok"),
            ("mailto:someone", "ok"),
            ("a:b", "ok"),
            ("1http://x", "invalid URI for request"),
            ("http://host:port/", "invalid port \":port\" after host"),
            ("http://host:/", "ok"),
            ("HTTP://X/", "ok"),
            ("http://x?y", "ok"),
            ("?q", "invalid URI for request"),
            ("//host/path", "ok"),
            ("http://ho^st/", "invalid character \"^\" in host name"),
            ("http://ho_st/", "ok"),
            ("http://[fe80::1%25en0]/", "ok"),
            ("http://[fe80::1%en0]/", "invalid URL escape \"%en\""),
            ("http:///path", "ok"),
            (
                "http://x/\u{7f}",
                "net/url: invalid control character in URL",
            ),
        ];
        for (raw, want) in cases {
            let got = match super::parse_request_uri(raw) {
                Ok(()) => "ok".to_owned(),
                Err(e) => e,
            };
            let want = if want == "ok" {
                want.to_owned()
            } else {
                format!("parse {}: {want}", crate::go::go_quote(raw))
            };
            assert_eq!(got, want, "{raw:?}");
        }
    }
}
