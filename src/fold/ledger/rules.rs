//! The rule table: the structured forms that shape alone reads wrong
//! (spaces inside a phone number, an IBAN or a code of spaced groups, a
//! URL's query, a date's month, brackets inside an element string or an
//! indexed address), one row each with its pattern, its check and its
//! examples.
//!
//! Everything else is recognised by its shape ([`super::shape`]). A row's
//! match is an entry when it stands apart (no letter, digit or joining mark
//! right before or after it) and its check passes; a row whose [`Rule::keep`]
//! is false hides what it matches (a browser's user agent, a URL with a
//! password), so that nothing inside it becomes an entry.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use super::lists::{LABELS, SECRET_NAMES};
use super::shape::is_secret;

/// One structured form.
pub(super) struct Rule {
    /// What the form is (the table test names a failing row by it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub name: &'static str,
    /// Its pattern, read over bytes, classes and word boundaries ASCII.
    pub pattern: &'static str,
    /// The kinds of byte every match holds (see [`Triggers`]): the
    /// table's search runs only where a row's are, and a match is tried
    /// as a row only when it holds the row's.
    pub triggers: Triggers,
    /// Whether a match, checked, is an entry (`false`: it hides its text).
    pub keep: bool,
    /// Whether a match whose check fails hides its text (a URL with a
    /// secret) rather than leaving it to shape.
    pub hides_failed: bool,
    /// Whether the match's last byte may be punctuation to trim (a URL's
    /// sentence-ending `.`, an unbalanced `)`).
    pub trim: bool,
    /// The check a pattern without lookaround cannot make.
    pub check: fn(&str) -> bool,
    /// Found whole in a sentence (the table test runs them).
    #[cfg_attr(not(test), allow(dead_code))]
    pub examples: &'static [&'static str],
    /// Never an entry (the table test runs them).
    #[cfg_attr(not(test), allow(dead_code))]
    pub near_misses: &'static [&'static str],
}

/// The rows, in the order a match is tried at one position (longer or more
/// specific forms first).
pub(super) const RULES: &[Rule] = &[
    Rule {
        name: "user agent",
        triggers: Triggers::all(SLASH | DIGIT),
        pattern: r"[A-Za-z][A-Za-z0-9.-]*/[0-9][A-Za-z0-9._]*(?:[ ]+\([^()\n]*\))?(?:[ ]+[A-Za-z][A-Za-z0-9.-]*/[0-9][A-Za-z0-9._]*(?:[ ]+\([^()\n]*\))?)+",
        keep: false,
        hides_failed: false,
        trim: false,
        check: |_| true,
        examples: &[],
        near_misses: &[
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.6167.85 Safari/537.36",
            "curl/8.5.0 libcurl/8.5.0",
        ],
    },
    Rule {
        name: "url",
        triggers: Triggers::all(COLON | SLASH),
        pattern: r#"\b(?:jdbc:)?[A-Za-z][A-Za-z0-9+.-]{0,31}://[^ \t\r\n<>"'`|\x80-\xFF]+"#,
        keep: true,
        hides_failed: true,
        trim: true,
        check: |url| !url_holds_secret(url),
        examples: &[
            "https://grafana.acme.io/d/x1/edge?orgId=1&from=now-6h",
            "postgres://db.internal:5432/orders",
            "s3://exports/2026/orders.csv",
            "mongodb+srv://cluster0.mongodb.net/app",
        ],
        near_misses: &[
            "postgres://app:hunter2@db/orders",
            "https://api.acme.io/x?token=abc123",
        ],
    },
    Rule {
        name: "email",
        triggers: Triggers::all(AT),
        pattern: r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}\b",
        keep: true,
        hides_failed: false,
        trim: false,
        check: |_| true,
        examples: &["billing.ops@acme-corp.com", "j.doe+alerts@mail.example.org"],
        near_misses: &[],
    },
    Rule {
        name: "uuid",
        triggers: Triggers::all(DASH),
        pattern: r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
        keep: true,
        hides_failed: false,
        trim: false,
        check: |_| true,
        examples: &["3f2504e0-4f89-11d3-9a0c-0305e82c3301"],
        near_misses: &[],
    },
    Rule {
        name: "timestamp",
        triggers: Triggers::all(DIGIT | DASH | COLON),
        pattern: r"\b[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]{1,9})?)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?",
        keep: true,
        hides_failed: false,
        trim: false,
        check: |t| is_date(&t[..10]),
        examples: &[
            "2026-03-14T09:30:00Z",
            "2026-03-14 09:30:00.250+01:00",
            "2025-11-02T23:59",
        ],
        near_misses: &[],
    },
    Rule {
        name: "date",
        triggers: Triggers::all(DIGIT).and_any(DASH | SLASH | DOT),
        pattern: r"\b(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{1,2}[/.][0-9]{1,2}[/.][0-9]{4})\b",
        keep: true,
        hides_failed: false,
        trim: false,
        check: is_date,
        examples: &["2025-10-14", "11/30/2026", "14.03.2026"],
        near_misses: &["1/2/3"],
    },
    Rule {
        name: "mac address",
        triggers: Triggers::any(COLON | DASH),
        pattern: r"\b[0-9A-Fa-f]{2}(?:([:-])[0-9A-Fa-f]{2}){5}\b",
        keep: true,
        hides_failed: false,
        trim: false,
        check: |mac| mac.as_bytes()[2] == mac.as_bytes()[5],
        examples: &["00:1A:2B:3C:4D:5E", "00-11-22-33-44-55", "00:11:22:33:44:55"],
        near_misses: &[],
    },
    Rule {
        name: "ipv6",
        triggers: Triggers::all(COLON),
        pattern: r"\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?|(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}|[0-9A-Fa-f:]*::[0-9A-Fa-f:]*",
        keep: true,
        hides_failed: false,
        trim: false,
        check: is_ipv6,
        examples: &["2001:db8:3c4d::1a2f", "[2001:db8::1]:8443", "fe80::1"],
        near_misses: &[],
    },
    Rule {
        name: "ipv4",
        triggers: Triggers::all(DIGIT | DOT),
        pattern: r"\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?::[0-9]{1,5}|/[0-9]{1,2})?\b",
        keep: true,
        hides_failed: false,
        trim: false,
        check: is_ipv4,
        examples: &["192.168.4.20", "10.20.0.0/16", "10.0.3.7:8080"],
        near_misses: &[],
    },
    Rule {
        name: "coordinates",
        triggers: Triggers::all(DIGIT | DOT),
        pattern: r"-?\b[0-9]{1,2}\.[0-9]{4,8}(?:\xC2\xB0)?(?: ?[NS])?, ?-?\b[0-9]{1,3}\.[0-9]{4,8}(?:\xC2\xB0)?(?: ?[EW]\b)?",
        keep: true,
        hides_failed: false,
        trim: false,
        check: is_coordinates,
        examples: &["48.858370, 2.294481", "-33.8688, 151.2093", "40.7128°, -74.0060°"],
        near_misses: &["98.1234, 10.5678", "12.5, 13.5"],
    },
    Rule {
        name: "iban",
        triggers: Triggers::all(UPPER | DIGIT),
        pattern: r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b",
        keep: true,
        hides_failed: false,
        trim: false,
        check: is_iban,
        examples: &["DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432"],
        near_misses: &["DE89 3704 0044 0532 0130 01"],
    },
    Rule {
        name: "money",
        triggers: Triggers::all(DIGIT).and_any(CURRENCY | UPPER),
        pattern: r"(?:(?:\$|€|£|¥|₹|\b(?:USD|EUR|GBP|JPY|CHF|CAD|AUD|INR|CNY|SEK|NOK|DKK|PLN|BRL|MXN)) ?)[0-9]+(?:[,.' ][0-9]{2,3})*\b|\b[0-9]+(?:[,.' ][0-9]{2,3})* ?(?:€|£|¥|₹|(?:USD|EUR|GBP|JPY|CHF|CAD|AUD|INR|CNY|SEK|NOK|DKK|PLN|BRL|MXN)\b)",
        keep: true,
        hides_failed: false,
        trim: false,
        check: |m| m.bytes().filter(u8::is_ascii_digit).count() >= 3,
        examples: &[
            "$4,312.50",
            "€1.299,00",
            "USD 12,500.00",
            "1 250,00 €",
            "CHF 980.00",
        ],
        near_misses: &["$5"],
    },
    Rule {
        name: "phone number",
        triggers: Triggers::all(DIGIT),
        pattern: r"\+[0-9]{1,3}(?:[ .-]?\(?[0-9]{1,4}\)?){2,5}[0-9]|\([0-9]{3}\) ?[0-9]{3}[ .-][0-9]{4}\b|\b[0-9]{3}[ .-][0-9]{3}[ .-][0-9]{4}\b|\b0[0-9]{2,4}[ -][0-9]{3,4}[ -][0-9]{3,4}\b",
        keep: true,
        hides_failed: false,
        trim: false,
        check: |p| (8..=15).contains(&p.bytes().filter(u8::is_ascii_digit).count()),
        examples: &[
            "+44 20 7946 0958",
            "+1 (415) 555-0134",
            "(415) 555-0134",
            "+49 30 901820",
            "415 555 0134",
            "020 7946 0958",
        ],
        near_misses: &["+1 2"],
    },
    Rule {
        name: "spaced code groups",
        triggers: Triggers::all(UPPER | DIGIT),
        pattern: r"\b(?:[A-Z]+[0-9]|[0-9]+[A-Z])[A-Z0-9]*(?: (?:[A-Z]+[0-9]|[0-9]+[A-Z])[A-Z0-9]*){1,2}\b|\b[A-Z]{2,5} [0-9]{5,12}(?: [0-9]{1,4})?\b",
        keep: true,
        hides_failed: false,
        trim: false,
        check: is_spaced_code,
        examples: &["SW1A 1AA", "M1 1AE", "K1A 0B1", "CAIU 864905 0", "MSKU 1234565"],
        near_misses: &[
            "A4 A5",
            "ISO 9001",
            "FY 2025",
            "NASA 2024",
            "Q3 2024",
            "COVID 19",
            "MP3 MP4",
            "ID 99812345",
        ],
    },
    Rule {
        name: "spaced digit groups",
        triggers: Triggers::all(DIGIT),
        pattern: r"\b[0-9]{3}(?: [0-9]{3}){2,3}(?: [0-9]{2,5})?\b",
        keep: true,
        hides_failed: false,
        trim: false,
        check: |groups| !groups.split(' ').all(|g| g.ends_with('0')),
        examples: &["732 829 320 00074", "552 100 554"],
        near_misses: &["100 200 300", "250 500 750 1000"],
    },
    Rule {
        name: "element string",
        triggers: Triggers::all(DIGIT),
        pattern: r"(?:\([0-9]{2,4}\)[0-9A-Za-z-]{1,30}){2,8}",
        keep: true,
        hides_failed: false,
        trim: false,
        check: |_| true,
        examples: &[
            "(01)09501101530003(17)250101(10)AB-123",
            "(00)340123450000000017(21)X7",
        ],
        near_misses: &["(1)a"],
    },
    Rule {
        name: "indexed address",
        triggers: Triggers::all(DOT),
        pattern: r#"\b[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)+\[(?:[0-9]+|"[^"\s\]]{1,64}")\](?:\.[A-Za-z_][A-Za-z0-9_-]*(?:\[(?:[0-9]+|"[^"\s\]]{1,64}")\])?)*"#,
        keep: true,
        hides_failed: false,
        trim: false,
        check: |_| true,
        examples: &[
            r#"module.network.aws_subnet.private["us-east-1a"]"#,
            "aws_instance.web[0]",
            r#"data.aws_iam_policy_document.assume["ec2"].json"#,
        ],
        near_misses: &["items[0]"],
    },
];

/// Whether `code` (groups of capitals and digits) reads as one code: five
/// characters or more in all; with a group of letters alone, six digits
/// or more (`ISO 9001` is a standard's name); else groups that open with a
/// letter and with a digit both (`SW1A 1AA`, not `MP3 MP4`); never with a
/// label first (`ID 99812345` is the label and the code).
fn is_spaced_code(code: &str) -> bool {
    let first = code.split(' ').next().unwrap_or("");
    if LABELS.iter().any(|l| l.eq_ignore_ascii_case(first)) {
        return false;
    }
    let chars = code.bytes().filter(u8::is_ascii_alphanumeric).count();
    let digits = code.bytes().filter(u8::is_ascii_digit).count();
    let groups = || code.split(' ').map(str::as_bytes);
    let letters_alone = groups().any(|g| g.iter().all(u8::is_ascii_uppercase));
    let opens = |digit: bool| groups().any(|g| g.first().is_some_and(|b| b.is_ascii_digit() == digit));
    chars >= 5
        && match letters_alone {
            true => digits >= 6,
            false => opens(true) && opens(false),
        }
}

/// Whether `pair` is a latitude (to 90) and a longitude (to 180), in
/// decimal degrees.
fn is_coordinates(pair: &str) -> bool {
    let degrees = |part: &str, most: f64| {
        let number: String = part
            .chars()
            .filter(|c| c.is_ascii_digit() || matches!(c, '.' | '-'))
            .collect();
        number.parse::<f64>().is_ok_and(|d| d.abs() <= most)
    };
    let mut parts = pair.split(',');
    parts.next().is_some_and(|lat| degrees(lat, 90.0)) && parts.next().is_some_and(|lon| degrees(lon, 180.0))
}

/// The kinds of byte a row's matches hold, as bits (see [`KINDS`]).
const DIGIT: u16 = 1;
const DASH: u16 = 1 << 1;
const COLON: u16 = 1 << 2;
const SLASH: u16 = 1 << 3;
const DOT: u16 = 1 << 4;
const AT: u16 = 1 << 5;
const UPPER: u16 = 1 << 6;
/// `$`, and the lead bytes of `€`, `₹` (0xE2) and `£`, `¥` (0xC2).
const CURRENCY: u16 = 1 << 7;

/// Each byte's kind (0 for most).
const KINDS: [u16; 256] = {
    let mut kinds = [0; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        kinds[b] = match c {
            b'0'..=b'9' => DIGIT,
            b'-' => DASH,
            b':' => COLON,
            b'/' => SLASH,
            b'.' => DOT,
            b'@' => AT,
            b'A'..=b'Z' => UPPER,
            b'$' | 0xC2 | 0xE2 => CURRENCY,
            _ => 0,
        };
        b += 1;
    }
    kinds
};

/// The kinds of byte `text` holds.
pub(super) fn kinds(text: &[u8]) -> u16 {
    text.iter().fold(0, |kinds, &b| kinds | KINDS[usize::from(b)])
}

/// What every match of a row holds: each kind of `all`, and one kind of
/// `any` (when it names any).
#[derive(Clone, Copy)]
pub(super) struct Triggers {
    all: u16,
    any: u16,
}

impl Triggers {
    const fn all(all: u16) -> Self {
        Triggers { all, any: 0 }
    }

    const fn any(any: u16) -> Self {
        Triggers { all: 0, any }
    }

    const fn and_any(self, any: u16) -> Self {
        Triggers { any, ..self }
    }

    /// Whether a text holding the `kinds` of byte may hold a match.
    pub(super) fn met(self, kinds: u16) -> bool {
        kinds & self.all == self.all && (self.any == 0 || kinds & self.any != 0)
    }
}

/// The table compiled: every row in one alternation (one pass finds the
/// matches, leftmost first, the rows' order at one position), and each row
/// anchored, to tell which row a match is.
pub(super) struct Table {
    all: regex::bytes::Regex,
    each: Vec<OnceLock<Option<regex::bytes::Regex>>>,
}

/// The compiled table, once per process (`None` only if a row does not
/// compile, which the table test rules out).
pub(super) fn table() -> Option<&'static Table> {
    static TABLE: OnceLock<Option<Table>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            let all: Vec<String> = RULES.iter().map(|r| format!("(?:{})", r.pattern)).collect();
            Some(Table {
                all: regex::bytes::Regex::new(&format!("(?-u){}", all.join("|"))).ok()?,
                each: RULES.iter().map(|_| OnceLock::new()).collect(),
            })
        })
        .as_ref()
}

/// A row's match in a text.
pub(super) struct Matched {
    pub start: usize,
    pub end: usize,
    /// Whether it is an entry (else it hides its text).
    pub keep: bool,
}

impl Table {
    /// The row a match is: the first, in the table's order, that matches it
    /// whole (only the rows whose trigger bytes it holds are tried).
    fn row_of(&self, found: &[u8]) -> Option<&'static Rule> {
        let kinds = kinds(found);
        (0..RULES.len())
            .filter(|&i| RULES[i].triggers.met(kinds))
            .find_map(|i| {
                let each = self.each[i].get_or_init(|| {
                    regex::bytes::Regex::new(&format!("(?-u)^(?:{})$", RULES[i].pattern)).ok()
                });
                each.as_ref().filter(|re| re.is_match(found)).map(|_| &RULES[i])
            })
    }

    /// The rows' matches in `text`, in order, each trimmed and checked:
    /// those that stand apart (see the module's docs), and those that hide
    /// their text.
    pub(super) fn matches(&self, text: &str, out: &mut Vec<Matched>) {
        let kinds = kinds(text.as_bytes());
        if !RULES.iter().any(|rule| rule.triggers.met(kinds)) {
            return;
        }
        for m in self.all.find_iter(text.as_bytes()) {
            let Some(found) = text.get(m.start()..m.end()) else {
                continue;
            };
            let Some(rule) = self.row_of(found.as_bytes()) else {
                continue;
            };
            let found = if rule.trim { trim_end(found) } else { found };
            let (start, end) = (m.start(), m.start() + found.len());
            if !rule.keep || !(rule.check)(found) {
                // A failed check leaves the text to shape, unless the row
                // hides it (a URL with a secret).
                if !rule.keep || rule.hides_failed {
                    out.push(Matched {
                        start,
                        end,
                        keep: false,
                    });
                }
                continue;
            }
            if tied(text, start, end) {
                continue;
            }
            out.push(Matched {
                start,
                end,
                keep: true,
            });
        }
    }
}

/// Whether `text[start..end]` is part of a longer token: a letter, digit or
/// joining mark right before it, or right after it (a `.` or `:` only when
/// a letter or digit follows it).
fn tied(text: &str, start: usize, end: usize) -> bool {
    let joins = |c: char| c.is_alphanumeric() && !super::shape::is_other_script(c) || "_/@\\#+-".contains(c);
    let before = text[..start].chars().next_back();
    let mut after = text[end..].chars();
    let (next, then) = (after.next(), after.next());
    before
        .is_some_and(|c| joins(c) || c == '.' && text[..start].len() > 1 && !text[..start - 1].ends_with(' '))
        || next.is_some_and(|c| {
            joins(c) && c != '-'
                || (c == '.' || c == ':' || c == '-') && then.is_some_and(char::is_alphanumeric)
        })
}

/// `found` without the punctuation that ends a sentence or closes a bracket
/// around it.
pub(super) fn trim_end(found: &str) -> &str {
    let mut s = found;
    loop {
        let Some(last) = s.chars().last() else {
            return s;
        };
        let unbalanced = |open: char| s.matches(open).count() < s.matches(last).count();
        let strip = match last {
            '.' | ',' | ';' | ':' | '!' | '?' | '\'' | '"' | '`' | '*' => true,
            ')' => unbalanced('('),
            ']' => unbalanced('['),
            '}' => unbalanced('{'),
            _ => false,
        };
        if !strip {
            return s;
        }
        s = &s[..s.len() - last.len_utf8()];
    }
}

fn is_date(date: &str) -> bool {
    let parts: Vec<u32> = date
        .split(['-', '/', '.'])
        .filter_map(|p| p.parse().ok())
        .collect();
    let [a, b, c] = parts[..] else {
        return false;
    };
    // Year first, or day and month (either order) before the year.
    let (year, x, y) = if a > 999 { (a, b, c) } else { (c, a, b) };
    let fits = |m: u32, d: u32| (1..=12).contains(&m) && (1..=31).contains(&d);
    (1900..=2199).contains(&year) && (fits(x, y) || fits(y, x))
}

fn is_ipv4(found: &str) -> bool {
    match found.split_once('/') {
        Some((ip, bits)) => ip.parse::<Ipv4Addr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 32),
        None => (found.split(':').next()).is_some_and(|ip| ip.parse::<Ipv4Addr>().is_ok()),
    }
}

fn is_ipv6(found: &str) -> bool {
    let ip = found
        .strip_prefix('[')
        .map_or(found, |rest| rest.split(']').next().unwrap_or(""));
    // Two groups at least (`::` and `2::` are Rust paths more often than
    // addresses), or the loopback.
    let groups = ip.split(':').filter(|g| !g.is_empty()).count();
    let hex = ip.bytes().any(|b| b.is_ascii_digit());
    ip.parse::<Ipv6Addr>().is_ok() && hex && (groups >= 2 || ip == "::1")
}

/// An IBAN's check digits (ISO 13616: mod 97 of the rearranged number).
fn is_iban(found: &str) -> bool {
    let raw: Vec<u8> = found.bytes().filter(|b| *b != b' ').collect();
    if !(15..=34).contains(&raw.len()) {
        return false;
    }
    let rearranged = raw[4..].iter().chain(&raw[..4]);
    let mut rest = 0u32;
    for &b in rearranged {
        let value = match b {
            b'0'..=b'9' => u32::from(b - b'0'),
            b'A'..=b'Z' => u32::from(b - b'A') + 10,
            _ => return false,
        };
        rest = if value >= 10 {
            (rest * 100 + value) % 97
        } else {
            (rest * 10 + value) % 97
        };
    }
    rest == 1
}

/// Whether a URL carries a secret, never copied: a password
/// (`postgres://app:secret@db/x`), a user that is a service's key
/// (`https://ghp_…@github.com/…`), or a query parameter named for one
/// (`?token=`, `&X-Amz-Signature=`, `?api_key=`, `&sig=`).
pub(super) fn url_holds_secret(url: &str) -> bool {
    let rest = url.split_once("://").map_or("", |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if let Some((user, _)) = authority.rsplit_once('@') {
        if user.contains(':') || is_secret(user) {
            return true;
        }
    }
    // A password with a raw `/`, `?` or `#` (`app:pa/ss@db`) ends the
    // authority early: a `:` before the first `@` and the first `/`, that
    // no port follows.
    if let Some((before, _)) = rest.split_once('@') {
        let colon = before
            .find(':')
            .filter(|&c| before.find('/').is_none_or(|slash| c < slash));
        if let Some(after) = colon.map(|c| &before[c + 1..]) {
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            let port = digits > 0 && after[digits..].starts_with(['/', '?', '#']);
            if !port {
                return true;
            }
        }
    }
    let query = rest.split_once('?').map_or("", |(_, q)| q);
    query.split(['&', ';', '#']).any(|pair| {
        let name = pair.split('=').next().unwrap_or("").to_ascii_lowercase();
        SECRET_NAMES.iter().any(|s| name.contains(s)) || name == "sig"
    }) || rest.split(['/', '?', '&', '=']).any(is_secret)
}
