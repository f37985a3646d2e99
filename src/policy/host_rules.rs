//! The host allowlist: patterns as users write them (`example.com`, `*.example.com`,
//! `127.0.0.1:8080`, `[::1]`), the named sets they may use (`@registries`), and the verdict
//! for one requested host and port.
//!
//! Names are compared as DNS compares them: ASCII case-insensitively and without the
//! trailing dot of a fully qualified name, so `Example.COM.` is `example.com`. An IP literal
//! pattern only matches a request that names that literal: a name is never matched by the
//! address it happens to resolve to, because resolution is the proxy's later step and its
//! answer may change.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::sync::LazyLock;

/// The named sets, as profile data (`@name` in an allowlist).
const HOST_SETS: &str = include_str!("../../profiles/host-sets.json");

/// The parsed sets. The data is embedded and checked by a unit test; were it ever
/// unreadable, every set would be unknown, and naming one an error — never a wider list.
static SETS: LazyLock<BTreeMap<String, Vec<String>>> =
    LazyLock::new(|| serde_json::from_str(HOST_SETS).unwrap_or_default());

/// The ports a pattern without `:port` allows: plain HTTP and HTTPS.
const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// One allowlist entry: `host`, `*.domain` (subdomains only, not domain itself), an IP
/// literal (`127.0.0.1`, `[::1]`), each with optional `:port`. No port = 80 and 443.
/// `*` alone, empty, a bad port, or characters outside [A-Za-z0-9.-] (after `*.`) refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPattern {
    host: PatternHost,
    port: Option<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum PatternHost {
    /// A host name, lower case, without a trailing dot.
    Name(String),
    /// `*.domain`: any name below `domain` (lower case, without a trailing dot).
    Subdomains(String),
    /// An address literal.
    Ip(IpAddr),
}

/// Why an allowlist entry was not taken; the message says what to write instead.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct HostError {
    message: String,
}

impl HostError {
    fn entry(entry: &str, why: impl fmt::Display) -> Self {
        HostError {
            message: format!("invalid host pattern `{entry}`: {why}"),
        }
    }
}

/// The hint every malformed entry ends with.
const FORMS: &str =
    "write a host (example.com), its subdomains (*.example.com) or an address (127.0.0.1, [::1]), \
     each with an optional :port";

impl FromStr for HostPattern {
    type Err = HostError;

    fn from_str(entry: &str) -> Result<Self, HostError> {
        let text = entry.trim();
        if text.is_empty() {
            return Err(HostError::entry(entry, format!("it is empty; {FORMS}")));
        }
        let (host, port) = split_port(text).map_err(|why| HostError::entry(entry, why))?;
        let host = parse_pattern_host(host).map_err(|why| HostError::entry(entry, why))?;
        Ok(HostPattern { host, port })
    }
}

/// Splits `host[:port]`, where an IPv6 host must be in brackets.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let Some(close) = rest.find(']') else {
            return Err(format!("an IPv6 address needs its closing `]`; {FORMS}"));
        };
        let after = &rest[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(port) => Some(port),
            None if after.is_empty() => None,
            None => return Err(format!("unexpected `{after}` after `]`; {FORMS}")),
        };
        (&text[..close + 2], port)
    } else {
        match text.matches(':').count() {
            0 => (text, None),
            1 => match text.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (text, None),
            },
            _ => {
                return Err(format!(
                    "write an IPv6 address in brackets, as in [::1] or [::1]:8080; {FORMS}"
                ))
            }
        }
    };
    let port = match port {
        None => None,
        Some(port) => Some(parse_port(port)?),
    };
    Ok((host, port))
}

fn parse_port(port: &str) -> Result<u16, String> {
    let number = if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        None
    } else {
        port.parse::<u16>().ok().filter(|&p| p != 0)
    };
    number.ok_or_else(|| format!("`{port}` is not a port: write a number from 1 to 65535"))
}

fn parse_pattern_host(host: &str) -> Result<PatternHost, String> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']').unwrap_or(inner);
        return inner
            .parse::<Ipv6Addr>()
            .map(|ip| PatternHost::Ip(IpAddr::V6(ip)))
            .map_err(|_| format!("`{inner}` is not an IPv6 address; {FORMS}"));
    }
    if host == "*" {
        return Err(
            "`*` alone would allow every host; list the hosts the command needs, or a domain's \
             subdomains as *.example.com"
                .to_string(),
        );
    }
    if let Some(domain) = host.strip_prefix("*.") {
        let domain = domain.strip_suffix('.').unwrap_or(domain);
        if domain.is_empty() {
            return Err(format!(
                "`*.` needs a domain after it, as in *.example.com; {FORMS}"
            ));
        }
        if domain.contains('*') {
            return Err(format!(
                "`*` may only stand alone as the first label, as in *.example.com; {FORMS}"
            ));
        }
        return match check_name(domain)? {
            Named::Name(domain) => Ok(PatternHost::Subdomains(domain)),
            Named::Ip(_) => Err(format!(
                "`*.` needs a domain name after it, not an address; {FORMS}"
            )),
        };
    }
    if host.contains('*') {
        return Err(format!(
            "`*` may only stand alone as the first label, as in *.example.com; {FORMS}"
        ));
    }
    match check_name(host)? {
        Named::Name(name) => Ok(PatternHost::Name(name)),
        Named::Ip(ip) => Ok(PatternHost::Ip(IpAddr::V4(ip))),
    }
}

enum Named {
    Name(String),
    Ip(Ipv4Addr),
}

/// Checks a host name (or dotted IPv4 literal) and returns it in canonical form.
fn check_name(host: &str) -> Result<Named, String> {
    let name = host.strip_suffix('.').unwrap_or(host);
    if let Ok(ip) = name.parse::<Ipv4Addr>() {
        return Ok(Named::Ip(ip));
    }
    if name.is_empty() {
        return Err(format!("the host is empty; {FORMS}"));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '.' || *c == '-'))
    {
        return Err(format!(
            "`{bad}` cannot be part of a host name (letters, digits, `.` and `-` only); {FORMS}"
        ));
    }
    let bad_label = |label: &str| {
        label.is_empty() || label.len() > 63 || label.starts_with('-') || label.ends_with('-')
    };
    if name.len() > 253 || name.split('.').any(bad_label) {
        return Err(format!(
            "`{name}` is not a host name (a label is empty, over-long, or starts or ends \
             with `-`); {FORMS}"
        ));
    }
    // A name whose last label is numeric is not a DNS name; the resolver would read some of
    // them as abbreviated addresses (`127.1` is 127.0.0.1), so they are not taken as names.
    if name
        .rsplit('.')
        .next()
        .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!(
            "`{name}` is neither a host name nor a full IPv4 address; {FORMS}"
        ));
    }
    Ok(Named::Name(name.to_ascii_lowercase()))
}

/// A requested host in the form patterns are compared with and `--allow-host` takes: lower
/// case, without the trailing dot, an IPv6 literal in brackets. None for anything that is
/// neither a host name nor an IP literal (such a host matches no pattern).
pub fn canonical_host(host: &str) -> Option<String> {
    match request_host(host)? {
        RequestHost::Ip(IpAddr::V6(ip)) => Some(format!("[{ip}]")),
        RequestHost::Ip(IpAddr::V4(ip)) => Some(ip.to_string()),
        RequestHost::Name(name) => Some(name),
    }
}

enum RequestHost {
    Name(String),
    Ip(IpAddr),
}

fn request_host(host: &str) -> Option<RequestHost> {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner
            .parse::<Ipv6Addr>()
            .ok()
            .map(|ip| RequestHost::Ip(IpAddr::V6(ip)));
    }
    if let Ok(ip) = host.parse::<Ipv6Addr>() {
        return Some(RequestHost::Ip(IpAddr::V6(ip)));
    }
    match check_name(host).ok()? {
        Named::Name(name) => Some(RequestHost::Name(name)),
        Named::Ip(ip) => Some(RequestHost::Ip(IpAddr::V4(ip))),
    }
}

impl HostPattern {
    /// Whether a request for `host` (a name, an IPv4 literal, or an IPv6 literal with or
    /// without brackets) on `port` falls under this pattern.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        };
        port_ok
            && match request_host(host) {
                Some(requested) => self.host_matches(&requested),
                None => false,
            }
    }

    /// As [`HostPattern::matches`], but a pattern without a port matches every port.
    fn denies(&self, host: &str, port: u16) -> bool {
        let port_ok = self.port.is_none_or(|p| p == port);
        port_ok && request_host(host).is_some_and(|requested| self.host_matches(&requested))
    }

    fn host_matches(&self, requested: &RequestHost) -> bool {
        match (&self.host, requested) {
            (PatternHost::Ip(want), RequestHost::Ip(got)) => want == got,
            (PatternHost::Name(want), RequestHost::Name(got)) => want == got,
            (PatternHost::Subdomains(domain), RequestHost::Name(got)) => got
                .strip_suffix(domain.as_str())
                .and_then(|prefix| prefix.strip_suffix('.'))
                .is_some_and(|sub| !sub.is_empty()),
            _ => false,
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            PatternHost::Name(name) => f.write_str(name)?,
            PatternHost::Subdomains(domain) => write!(f, "*.{domain}")?,
            PatternHost::Ip(IpAddr::V4(ip)) => write!(f, "{ip}")?,
            PatternHost::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

impl serde::Serialize for HostPattern {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Expands `@name` sets from `profiles/host-sets.json` (embedded with include_str!) and
/// parses every other entry. Unknown set → HostError naming the known sets. An entry that
/// appears twice is kept once.
pub fn parse_entries<I: IntoIterator<Item = S>, S: AsRef<str>>(
    entries: I,
) -> Result<Vec<HostPattern>, HostError> {
    let mut patterns: Vec<HostPattern> = Vec::new();
    let mut push = |pattern: HostPattern| {
        if !patterns.contains(&pattern) {
            patterns.push(pattern);
        }
    };
    for entry in entries {
        let entry = entry.as_ref().trim();
        match entry.strip_prefix('@') {
            Some(name) => {
                let Some(members) = SETS.get(name) else {
                    let known: Vec<String> = set_names().iter().map(|n| format!("@{n}")).collect();
                    return Err(HostError {
                        message: format!(
                            "unknown host set `{entry}`; the known sets are {}",
                            known.join(", ")
                        ),
                    });
                };
                for member in members {
                    push(member.parse()?);
                }
            }
            None => push(entry.parse()?),
        }
    }
    Ok(patterns)
}

/// The names of the sets `@name` may refer to, for docs and completions.
pub fn set_names() -> Vec<&'static str> {
    SETS.keys().map(String::as_str).collect()
}

/// The effective rules of one call.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct HostRules {
    pub allowed: Vec<HostPattern>,
    pub denied: Vec<HostPattern>,
    pub allow_private: bool,
}

/// What the rules say about one host and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// No allowed pattern matches: `--allow-host` would allow it.
    NotListed,
    /// A denied pattern matches: denials win over every allowance.
    Denied,
}

impl HostRules {
    /// Nothing allowed: the sandbox gets no proxy at all.
    pub fn is_empty(&self) -> bool {
        self.allowed.is_empty()
    }

    /// The verdict for a request to `host` on `port`; denied wins over allowed.
    /// A denial without a port denies every port: `denied_hosts: ["example.com"]` is not
    /// undone by `--allow-host example.com:8080`.
    pub fn verdict(&self, host: &str, port: u16) -> Verdict {
        if self.denied.iter().any(|p| p.denies(host, port)) {
            Verdict::Denied
        } else if self.allowed.iter().any(|p| p.matches(host, port)) {
            Verdict::Allowed
        } else {
            Verdict::NotListed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> HostPattern {
        text.parse()
            .unwrap_or_else(|e| panic!("`{text}` should parse: {e}"))
    }

    fn refused(text: &str) -> String {
        match text.parse::<HostPattern>() {
            Ok(p) => panic!("`{text}` should be refused, parsed as {p}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn canonical_forms() {
        for (written, canonical) in [
            ("Example.COM", "example.com"),
            ("example.com.", "example.com"),
            ("  registry.npmjs.org  ", "registry.npmjs.org"),
            ("example.com:8443", "example.com:8443"),
            ("*.Example.com", "*.example.com"),
            ("*.example.com.:80", "*.example.com:80"),
            ("*.com", "*.com"),
            ("127.0.0.1", "127.0.0.1"),
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            ("[::1]", "[::1]"),
            ("[0:0::1]:443", "[::1]:443"),
            ("[2001:DB8::1]:8080", "[2001:db8::1]:8080"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ] {
            assert_eq!(pattern(written).to_string(), canonical, "{written}");
        }
    }

    #[test]
    fn refusals_say_what_to_write() {
        for text in [
            "",
            "   ",
            "*",
            "*:443",
            "*.",
            "*.*",
            "*.*.com",
            "a.*.com",
            "ex*ample.com",
            "*example.com",
            "example.com:",
            "example.com:0",
            "example.com:65536",
            "example.com:+80",
            "example.com:http",
            "::1",
            "2001:db8::1:443",
            "[::1",
            "[::1]x",
            "[127.0.0.1]",
            "exa mple.com",
            "exam_ple.com",
            "a..b",
            ".example.com",
            "http://example.com",
            "example.com/path",
            "user@example.com",
            "bücher.example",
            "127.1",
            "1.2.3",
            "*.1.2.3.4",
            "*.10",
            "-",
            "-a.example.com",
            "a-.example.com",
        ] {
            let message = refused(text);
            assert!(
                message.contains("host") || message.contains("port"),
                "`{text}`: {message}"
            );
        }
        assert!(refused("*").contains("every host"));
        assert!(refused("example.com:99999").contains("1 to 65535"));
        assert!(refused("::1").contains("[::1]"));
    }

    #[test]
    fn names_match_case_insensitively_without_trailing_dot() {
        let p = pattern("Registry.NPMjs.org");
        assert!(p.matches("registry.npmjs.org", 443));
        assert!(p.matches("REGISTRY.npmjs.ORG", 80));
        assert!(p.matches("registry.npmjs.org.", 443));
        assert!(!p.matches("registry.npmjs.org..", 443));
        assert!(!p.matches("npmjs.org", 443));
        assert!(!p.matches("evil.registry.npmjs.org", 443));
        assert!(!p.matches("registry.npmjs.org.evil.com", 443));
        assert!(!p.matches("registry.npmjs.org", 8080));
        assert!(!p.matches("registry.npmjs.org", 22));
        assert!(pattern("registry.npmjs.org.").matches("registry.npmjs.org", 443));
    }

    #[test]
    fn ports_default_to_http_and_https() {
        let any = pattern("example.com");
        assert!(any.matches("example.com", 80) && any.matches("example.com", 443));
        assert!(!any.matches("example.com", 8080));
        let one = pattern("example.com:8080");
        assert!(one.matches("example.com", 8080));
        assert!(!one.matches("example.com", 80) && !one.matches("example.com", 443));
    }

    #[test]
    fn subdomain_patterns_match_below_the_domain_only() {
        let p = pattern("*.example.com");
        assert!(p.matches("a.example.com", 443));
        assert!(p.matches("a.b.example.com", 443));
        assert!(p.matches("A.Example.Com.", 80));
        assert!(!p.matches("example.com", 443));
        assert!(!p.matches("example.com.", 443));
        assert!(!p.matches("aexample.com", 443));
        assert!(!p.matches(".example.com", 443));
        assert!(!p.matches("a.example.com.evil", 443));
        assert!(!p.matches("a.example.com", 8443));
        let tld = pattern("*.com");
        assert!(tld.matches("example.com", 443));
        assert!(!tld.matches("com", 443));
    }

    #[test]
    fn address_patterns_match_only_that_literal() {
        let v4 = pattern("127.0.0.1:8080");
        assert!(v4.matches("127.0.0.1", 8080));
        assert!(!v4.matches("127.0.0.1", 8081));
        assert!(!v4.matches("localhost", 8080));
        assert!(!v4.matches("127.0.0.2", 8080));
        assert!(!v4.matches("2130706433", 8080));
        assert!(!v4.matches("127.1", 8080));
        assert!(!v4.matches("::ffff:127.0.0.1", 8080));
        let v6 = pattern("[::1]:8080");
        assert!(v6.matches("[::1]", 8080));
        assert!(v6.matches("::1", 8080));
        assert!(v6.matches("[0:0:0:0:0:0:0:1]", 8080));
        assert!(!v6.matches("127.0.0.1", 8080));
        assert!(!v6.matches("localhost", 8080));
        // A name never matches an address pattern, nor an address a name pattern.
        assert!(!pattern("localhost").matches("127.0.0.1", 443));
        assert!(!pattern("*.0.0.1.example").matches("127.0.0.1", 443));
    }

    #[test]
    fn requests_for_malformed_hosts_match_nothing() {
        let p = pattern("*.example.com");
        for host in [
            "",
            "a b.example.com",
            "a_b.example.com",
            "x.example.com/",
            "*.example.com",
        ] {
            assert!(!p.matches(host, 443), "{host:?}");
        }
        assert_eq!(
            canonical_host("A.Example.COM."),
            Some("a.example.com".into())
        );
        assert_eq!(canonical_host("::1"), Some("[::1]".into()));
        assert_eq!(canonical_host("[::1]"), Some("[::1]".into()));
        assert_eq!(canonical_host("127.0.0.1"), Some("127.0.0.1".into()));
        assert_eq!(canonical_host("a b"), None);
        assert_eq!(canonical_host("127.1"), None);
    }

    #[test]
    fn denied_wins_over_allowed() {
        let rules = HostRules {
            allowed: parse_entries(["*.example.com", "other.org"]).unwrap(),
            denied: parse_entries(["secret.example.com"]).unwrap(),
            allow_private: false,
        };
        assert!(!rules.is_empty());
        assert_eq!(rules.verdict("www.example.com", 443), Verdict::Allowed);
        assert_eq!(rules.verdict("Secret.Example.com.", 443), Verdict::Denied);
        // A denial without a port denies every port, whatever allows one.
        let with_port = HostRules {
            allowed: parse_entries(["secret.example.com:8080"]).unwrap(),
            ..rules.clone()
        };
        assert_eq!(
            with_port.verdict("secret.example.com", 8080),
            Verdict::Denied
        );
        assert_eq!(rules.verdict("other.org", 80), Verdict::Allowed);
        assert_eq!(rules.verdict("other.org", 8080), Verdict::NotListed);
        assert_eq!(rules.verdict("example.com", 443), Verdict::NotListed);
        assert!(HostRules::default().is_empty());
        assert_eq!(
            HostRules::default().verdict("example.com", 443),
            Verdict::NotListed
        );
    }

    #[test]
    fn registries_set_expands_and_is_valid() {
        assert_eq!(set_names(), vec!["registries"]);
        let patterns = parse_entries(["@registries", "crates.io"]).unwrap();
        let shown: Vec<String> = patterns.iter().map(ToString::to_string).collect();
        for host in [
            "registry.npmjs.org",
            "pypi.org",
            "files.pythonhosted.org",
            "crates.io",
            "index.crates.io",
            "static.crates.io",
            "proxy.golang.org",
            "sum.golang.org",
            "github.com",
            "codeload.github.com",
            "objects.githubusercontent.com",
        ] {
            assert!(
                shown.contains(&host.to_string()),
                "{host} missing from {shown:?}"
            );
        }
        // `crates.io` was in the set already: kept once.
        assert_eq!(shown.iter().filter(|s| *s == "crates.io").count(), 1);
        assert_eq!(shown.len(), 11);
    }

    #[test]
    fn unknown_set_names_the_known_ones() {
        let message = match parse_entries(["@registry"]) {
            Ok(p) => panic!("parsed {p:?}"),
            Err(e) => e.to_string(),
        };
        assert!(message.contains("@registry"), "{message}");
        assert!(message.contains("@registries"), "{message}");
    }

    #[test]
    fn serializes_as_canonical_text() {
        let rules = HostRules {
            allowed: parse_entries(["Example.com:8080", "[::1]"]).unwrap(),
            denied: Vec::new(),
            allow_private: true,
        };
        let json = serde_json::to_string(&rules).unwrap();
        assert_eq!(
            json,
            r#"{"allowed":["example.com:8080","[::1]"],"denied":[],"allow_private":true}"#
        );
    }
}
