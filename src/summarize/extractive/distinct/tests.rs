//! The similarity join against the first way of telling the distinct lines, kept as the reference.

use super::super::gather::{Place, Section};
use super::*;

#[allow(clippy::manual_contains)]
/// The first way of telling the distinct lines (a search of each line's
/// words for each word of another's), kept as the reference: `members` (the candidates of `Discussed:`, in order) less the lines that
/// say again what a better one says (the best first, ties the earlier):
/// two thirds of their words the same, and every word of theirs that names
/// something exact (a digit, `.`, `/`, `:`, `@` or `\\` in it) in the
/// better one too.
/// `The cache dashboard looks steady.` ten times, each with another name,
/// is one line; two requests about different files are two.
fn reference(candidates: &[Candidate], members: &[usize]) -> Vec<usize> {
    /// Lines of fewer words are too short to call the same.
    const WORDS: usize = 4;
    let words = |k: usize| {
        let text = &candidates[k].text;
        // Without the speaker (`assistant: `).
        let said = spoken(text);
        let mut words: Vec<String> = said
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        words.sort_unstable();
        words.dedup();
        words
    };
    let exact = |w: &str| w.contains(|c: char| c.is_ascii_digit() || "./:@\\".contains(c));
    let mut order = members.to_vec();
    order.sort_by(|a, b| candidates[*b].score.cmp(&candidates[*a].score).then(a.cmp(b)));
    let mut kept: Vec<(usize, Vec<String>)> = Vec::with_capacity(order.len());
    for k in order {
        let mine = words(k);
        let again = mine.len() >= WORDS
            && kept.iter().any(|(_, theirs)| {
                let shared = mine.iter().filter(|w| theirs.binary_search(w).is_ok()).count();
                let all = mine.len() + theirs.len() - shared;
                // Two in three of their words in common, and no name of its own.
                3 * shared >= 2 * all && mine.iter().all(|w| !exact(w) || theirs.binary_search(w).is_ok())
            });
        if !again {
            kept.push((k, mine));
        }
    }
    let mut kept: Vec<usize> = kept.into_iter().map(|(k, _)| k).collect();
    kept.sort_unstable();
    kept
}

fn line(words: &[&str], speaker: bool) -> String {
    let said = words.join(" ");
    match speaker {
        true => format!("assistant: {said}"),
        false => said,
    }
}

proptest::proptest! {
    /// Lines told apart by numbered words are the lines told apart by
    /// their words, whatever their words, scores and repeats (drawn
    /// from few words, so that many lines share most of theirs).
    #[test]
    fn numbered_words_tell_the_same_lines_apart(
        lines in proptest::collection::vec(
            (
                proptest::collection::vec(
                    proptest::sample::select(vec![
                        "the", "The", "cache", "queue", "steady,", "latency", "band", "is",
                        "/srv/a.log", "/srv/b.log", "v1.2", "ÉTÉ", "été", "--", "a@b.io", "x",
                    ]),
                    0..12,
                ),
                0i32..4,
                proptest::bool::ANY,
            ),
            0..40,
        ),
        common in 0..20usize,
        budget in 0..200usize,
    ) {
        let candidates: Vec<Candidate> = lines
            .iter()
            .enumerate()
            .map(|(i, (words, score, speaker))| Candidate {
                section: Section::Discussed,
                place: i as Place,
                message: Some(i),
                score: *score,
                bonus: 0,
                exact: false,
                text: line(words, *speaker),
                anchor: None,
                cost: std::cell::Cell::new(None),
                anchor_cost: std::cell::Cell::new(None),
            })
            .collect();
        let members: Vec<usize> = (0..candidates.len()).collect();
        // All the words as bits, none, or some.
        let exact = reference(&candidates, &members);
        proptest::prop_assert_eq!(&join(&candidates, &members, common, usize::MAX), &exact);
        // Out of budget, the lines not compared are kept: only repeats
        // come back, and fewer the more it reads.
        let short = join(&candidates, &members, common, budget);
        let less = join(&candidates, &members, common, budget / 2);
        proptest::prop_assert!(exact.iter().all(|k| short.binary_search(k).is_ok()));
        proptest::prop_assert!(short.iter().all(|k| less.binary_search(k).is_ok()));
        proptest::prop_assert_eq!(join(&candidates, &members, common, 0), members.clone());
    }
}
