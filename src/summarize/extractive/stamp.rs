//! Time anchors: the date a turn opens with, and the one a summary line is written after.

/// A date in text: an ISO date, a day and a month name and a year either
/// way round (`8 May, 2023`, `May 8th 2023`), a month name and a year, or
/// a numeric date (`08/05/2023`, `8.5.2023`).
const DATE: &str = r"(?i)\b(?:\d{4}-\d{2}-\d{2}|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?MONTH,?\s+\d{4}|MONTH\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}|\d{1,2}(?:st|nd|rd|th)?\s+MONTH|MONTH\s+\d{1,2}(?:st|nd|rd|th)?|MONTH,?\s+\d{4}|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}|\d{4}/\d{1,2}/\d{1,2})\b";

/// Month names for [`DATE`].
const MONTH: &str = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?";

/// The time anchor a message opens with, and where its stamp ends: a
/// bracketed stamp that holds a date (`[1:56 pm on 8 May, 2023]` anchors
/// `8 May, 2023`), or an ISO date or timestamp (`2023-05-08T13:56:00Z`
/// anchors `2023-05-08`). `None` when it opens with none.
pub(super) fn stamp(text: &str) -> Option<(&str, usize)> {
    static RE: std::sync::OnceLock<Option<(regex::Regex, regex::Regex)>> = std::sync::OnceLock::new();
    let (date, iso) = RE
        .get_or_init(|| {
            let date = regex::Regex::new(&DATE.replace("MONTH", MONTH)).ok()?;
            let iso = regex::Regex::new(
                r"^\s*(\d{4}-\d{2}-\d{2})(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?:\s*[-:|]\s+|\s+|$)",
            )
            .ok()?;
            Some((date, iso))
        })
        .as_ref()?;
    let opening = text.trim_start();
    let skipped = text.len() - opening.len();
    if let Some(inner) = opening.strip_prefix('[').or_else(|| opening.strip_prefix('(')) {
        let close = inner.find([']', ')']).filter(|&at| at <= 80)?;
        let found = date.find(&inner[..close])?;
        let mut end = skipped + 1 + close + 1;
        end += text[end..].len() - text[end..].trim_start().len();
        return Some((&inner[found.start()..found.end()], end));
    }
    let m = iso.captures(text)?;
    Some((m.get(1)?.as_str(), m.get(0)?.end()))
}

/// A line of a previous summary without its time anchor (`[8 May, 2023]
/// user: ...`), and the anchor.
pub(super) fn unanchored(line: &str) -> (Option<&str>, &str) {
    match line.starts_with('[').then(|| stamp(line)).flatten() {
        Some((anchor, end)) => (Some(anchor), &line[end..]),
        None => (None, line),
    }
}
