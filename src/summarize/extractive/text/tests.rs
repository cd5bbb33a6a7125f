//! Sentence ends found a byte at a time, lower case and raw words, against their plain definitions.

use super::super::keywords::raw_words;
use super::*;

/// The rule [`sentence_end`] keeps, read a character at a time.
fn end_by_chars(text: &str) -> usize {
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let ends = match c {
            '\n' | '。' | '！' | '？' => true,
            '.' | '!' | '?' => chars.peek().is_none_or(|&(_, n)| n.is_whitespace()),
            _ => false,
        };
        if ends {
            return i + c.len_utf8();
        }
    }
    text.len()
}

/// Texts of the characters that end sentences, those that look like
/// them (`。`'s neighbours share its first byte, `！`'s too), Unicode
/// spaces, and upper-case letters whose lower case is longer or not ASCII.
fn texts() -> impl proptest::strategy::Strategy<Value = String> {
    let pieces = vec![
        "a", "B", ".", "!", "?", "\n", " ", "\t", "\u{a0}", "\u{3000}", "。", "、", "！", "？", "＃", "ｚ",
        "İ", "Σ", "ß", "K", "é", "日本", "v1.2", "...", "?!", "\u{2028}",
    ];
    proptest::collection::vec(proptest::sample::select(pieces), 0..40).prop_map(|p| p.concat())
}

use proptest::strategy::Strategy as _;

proptest::proptest! {
    #[test]
    fn sentence_ends_are_found_as_a_character_at_a_time(text in texts()) {
        proptest::prop_assert_eq!(sentence_end(&text), end_by_chars(&text));
    }

    #[test]
    fn lower_is_to_lowercase(text in texts()) {
        proptest::prop_assert_eq!(lower(&text), text.to_lowercase());
    }

    #[test]
    fn raw_words_are_the_words_before_lower_case(text in texts()) {
        let by_chars: Vec<String> = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 4)
            .map(str::to_lowercase)
            .collect();
        let words: Vec<String> = raw_words(&text).map(str::to_lowercase).collect();
        proptest::prop_assert_eq!(words, by_chars);
    }
}
