use super::fit::fitting_prefix;
use super::*;
use crate::count::Heuristic;
use crate::fold::ledger::Tier;

/// `policy.fit` over `texts` of one tier.
#[allow(clippy::too_many_arguments)]
fn fit_in<C: TokenCounter + ?Sized>(
    policy: &FoldPolicy,
    text: &str,
    texts: &[&str],
    tokens: &[usize],
    held: &dyn Fn(usize) -> bool,
    limit: usize,
    counter: &C,
    exact: bool,
) -> Fitted {
    let tiers = vec![Tier::default(); texts.len()];
    let listing = Listing {
        texts,
        tokens,
        tiers: &tiers,
    };
    policy.fit(text, listing, held, (limit, limit), counter, exact)
}

#[test]
fn cuts_at_word_boundaries() {
    let chars = |t: &str| t.chars().count();
    assert_eq!(
        fitting_prefix("héllo wörld again", |t| chars(t) <= 13),
        "héllo wörld"
    );
    assert_eq!(fitting_prefix("héllo  wörld", |t| chars(t) <= 8), "héllo");
    assert_eq!(fitting_prefix("héllo", |_| true), "héllo");
    // A first word longer than the limit is cut at a character.
    assert_eq!(fitting_prefix("abcdefgh ij", |t| chars(t) <= 3), "abc");
    assert_eq!(fitting_prefix("abc", |t| t.is_empty()), "");
    assert_eq!(fitting_prefix("", |_| false), "");
}

/// `policy.finish` over `entries`, counted with the heuristic, exact;
/// and the entries it listed and dropped.
fn fin(
    policy: &FoldPolicy,
    text: &str,
    entries: &[String],
    limit: usize,
) -> (Fitted, Vec<String>, Vec<String>) {
    let texts: Vec<&str> = entries.iter().map(String::as_str).collect();
    let tokens: Vec<usize> = texts
        .iter()
        .map(|t| ledger::entry_tokens(t, &Heuristic))
        .collect();
    let fitted = fit_in(policy, text, &texts, &tokens, &|_| false, limit, &Heuristic, true);
    let kept = fitted.listed.iter().map(|&i| entries[i].clone()).collect();
    let dropped = fitted.dropped.iter().map(|&i| entries[i].clone()).collect();
    (fitted, kept, dropped)
}

#[test]
fn finish_respects_the_limit_and_the_cap() {
    let policy = FoldPolicy::new();
    let text = "word ".repeat(400);
    let text = text.trim();
    let (fitted, ..) = fin(&policy, text, &[], 100);
    assert!(fitted.truncated && fitted.tokens <= 100);
    assert!(fitted.body.ends_with("word"));
    let (capped, ..) = fin(&policy.clone().max_summary_tokens(10), text, &[], 100);
    assert!(capped.tokens <= policy.overhead(&Heuristic) + 10);
    let (nothing, ..) = fin(&policy, text, &[], 1);
    assert!(nothing.truncated && nothing.body.ends_with('…'));
    let (whole, ..) = fin(&policy, "short", &[], 100);
    assert!(!whole.truncated);
}

#[test]
fn the_ledger_takes_its_share_and_the_prose_is_cut_first() {
    let policy = FoldPolicy::new();
    let entries: Vec<String> = (0..40).map(|i| format!("/srv/data/file-{i:03}.csv")).collect();
    let text = "The agent loaded many files and compared them. ".repeat(20);
    let (fitted, kept, dropped) = fin(&policy, text.trim(), &entries, 300);
    assert!(fitted.tokens <= 300);
    assert!(fitted.truncated);
    assert!(!kept.is_empty() && !dropped.is_empty());
    assert_eq!(kept[0], entries[0], "newest first");
    assert_eq!(kept.len() + dropped.len(), entries.len());
    let section: usize = kept.iter().map(|e| Heuristic.count(e) + 2).sum();
    assert!(
        section <= (300 - policy.overhead(&Heuristic)) / 3,
        "within a third: the prose keeps its floor"
    );
    // Every entry line whole.
    let (_, listed) = ledger::split(&fitted.body);
    let listed: Vec<&str> = listed.iter().map(|e| e.0).collect();
    assert_eq!(listed, kept);
    // Entries the prose holds are not listed again.
    let (_, held, dropped) = fin(&policy, "Loaded /srv/data/file-000.csv.", &entries[..2], 300);
    assert_eq!(held, [entries[1].clone()]);
    assert!(dropped.is_empty());
    // Off: no section.
    let off = policy.clone().ledger(false);
    let begun = crate::fold::engine::Fold::begin(
        &off,
        &[],
        [Message::user("see /srv/x.csv")].iter(),
        (100, 0),
        &Heuristic,
    );
    assert!(begun.entries.texts.is_empty() && begun.allowance == 100);
}

#[test]
fn the_ledger_takes_the_room_a_short_prose_leaves() {
    let policy = FoldPolicy::new();
    let entries: Vec<String> = (0..40).map(|i| format!("/srv/data/file-{i:03}.csv")).collect();
    let (fitted, kept, dropped) = fin(&policy, "Files were loaded.", &entries, 300);
    assert!(fitted.tokens <= 300 && !fitted.truncated);
    let section: usize = kept.iter().map(|e| Heuristic.count(e) + 2).sum();
    assert!(
        section > (300 - policy.overhead(&Heuristic)) / 2,
        "{section}: more than its share"
    );
    assert_eq!(kept[..], entries[..kept.len()], "newest first");
    assert_eq!(kept.len() + dropped.len(), entries.len());
}

/// Where counting the whole says more than the parts (as BPE can), the
/// oldest entries leave until the whole fits, never the newest. A
/// counter that charges long texts extra reaches that recount.
#[test]
fn the_recount_drops_the_oldest_entries_when_the_whole_counts_more() {
    let policy = FoldPolicy::new();
    let surcharged = |t: &str| t.len().div_ceil(4) + (t.len() / 100).pow(2);
    let entries: Vec<String> = (0..30).map(|i| format!("/srv/data/file-{i:03}.csv")).collect();
    let texts: Vec<&str> = entries.iter().map(String::as_str).collect();
    let tokens: Vec<usize> = texts
        .iter()
        .map(|t| ledger::entry_tokens(t, &surcharged))
        .collect();
    let limit = 260;
    let fitted = fit_in(
        &policy,
        "Loaded.",
        &texts,
        &tokens,
        &|_| false,
        limit,
        &surcharged,
        true,
    );
    assert!(fitted.tokens <= limit, "{}", fitted.tokens);
    assert_eq!(
        fitted.tokens,
        surcharged.count_message(&policy.summary_message(&fitted.body))
    );
    // By the entries' own counts, more would have fitted than were listed.
    let overhead = policy.overhead(&surcharged);
    let room = limit - overhead - (surcharged.count_message(&policy.summary_message("Loaded.")) - overhead);
    let mut sum = surcharged.count(ledger::LEDGER_HEADING) + 2;
    let by_parts = tokens.iter().take_while(|&&t| {
        sum += t;
        sum <= room
    });
    let by_parts = by_parts.count();
    let listed = fitted.listed.clone();
    assert!(
        !listed.is_empty() && listed.len() < by_parts,
        "{} of {by_parts}",
        listed.len()
    );
    assert_eq!(
        listed,
        (0..listed.len()).collect::<Vec<_>>(),
        "the newest kept, the oldest dropped"
    );
}

/// Entries of every kind: words the patterns read, `key: value`, loose
/// ones (spaces), non-ASCII, repeats.
pub(crate) const POOL: &[&str] = &[
    "/srv/a.csv",
    "/srv/b.csv",
    "10.0.0.1",
    "PROJ-12",
    "v1.2.3",
    "run_id: r-77",
    "path: /tmp/x",
    "order 42",
    "deadbeef12",
    "https://x.io/p",
    "a@b.com",
    "C:\\x\\y.txt",
    "file-0.txt",
    "dataset: sales q3",
    "/données/été.csv",
    "https://例え.jp/パス",
    "名前: 東京-1.txt",
    "x:y",
];

/// Prose words, some of them entries or entries in punctuation.
const WORDS: &[&str] = &[
    "The",
    "agent",
    "read",
    "/srv/a.csv",
    "(/srv/b.csv)",
    "PROJ-12.",
    "order 42",
    "v1.2.3,",
    "été",
    "東京",
    "and",
    "then",
    "file-0.txt",
    "deadbeef12",
    "https://x.io/p",
    "sales q3",
    "a@b.com",
    "run_id: r-77",
    "/données/été.csv",
    "…",
    "x:y",
    "long-word-here",
];

/// Counters: words, characters / 4, and words with a charge for long
/// texts (not additive).
pub(crate) fn counter(kind: u8) -> impl Fn(&str) -> usize + Copy {
    move |t: &str| match kind {
        0 => t.split_whitespace().count(),
        1 => t.chars().count().div_ceil(4),
        _ => t.split_whitespace().count() + if t.len() > 60 { 3 } else { 0 },
    }
}

/// What `Fitted::dropped` says, on a prose cut twice: the second cut
/// uncovers `PROJ-12`, which the first cut still held, and it is
/// dropped (not left neither listed, shown nor dropped). (54 tokens: the
/// section's heading, its tier's, and two entries.)
#[test]
fn an_entry_the_second_cut_uncovers_is_dropped() {
    let counter = counter(1);
    let policy = FoldPolicy::new().ledger_percent(100);
    let entries = [
        "/srv/b.csv",
        "/srv/a.csv",
        "10.0.0.1",
        "10.0.0.1",
        "PROJ-12",
        "deadbeef12",
        "/srv/a.csv",
    ];
    let tokens: Vec<usize> = entries
        .iter()
        .map(|t| ledger::entry_tokens(t, &counter))
        .collect();
    let prose = "The The PROJ-12. The (/srv/b.csv) The The (/srv/b.csv) The deadbeef12";
    let fitted = fit_in(&policy, prose, &entries, &tokens, &|_| false, 54, &counter, false);
    assert!(!fitted.body[..fitted.prose_len].contains("PROJ-12"));
    assert_eq!(fitted.dropped, [4, 6]);
}

proptest::proptest! {
    /// The allowance told from the entries' sum, when they all fit the
    /// share, is the one a pass over them gives.
    #[test]
    fn the_allowance_told_from_a_sum_is_the_one_counted(
        tokens in proptest::collection::vec(0usize..40, 0..30),
        allowance in 0usize..400,
        percent in proptest::sample::select(vec![0u8, 10, 33, 100]),
        min in 0usize..100,
    ) {
        let policy = FoldPolicy::new().ledger_percent(percent).min_summary_tokens(min);
        let sum = tokens.iter().map(|&t| t as u128).sum();
        let tiers = vec![Tier::default(); tokens.len()];
        let walked = policy.told_allowance(&tokens, &tiers, (tokens.len(), u128::MAX), allowance, &Heuristic);
        let summed = policy.told_allowance(&tokens, &tiers, (tokens.len(), sum), allowance, &Heuristic);
        proptest::prop_assert_eq!(summed, walked);
    }

    /// Every candidate `finish` is given is listed, held by the prose
    /// it shows or by the kept turns, or reported dropped: none is
    /// lost without a word, and none is both listed and dropped.
    #[test]
    fn every_entry_is_listed_held_or_dropped(
        entries in proptest::collection::vec(0usize..POOL.len(), 0..24),
        words in proptest::collection::vec(0usize..WORDS.len(), 1..60),
        held_mask in proptest::collection::vec(proptest::bool::weighted(0.2), 24),
        limit in 0usize..250,
        percent in proptest::sample::select(vec![0u8, 10, 33, 100]),
        exact in proptest::bool::ANY,
        max in proptest::option::of(0usize..120),
        kind in 0u8..3,
    ) {
        let counter = counter(kind);
        let mut policy = FoldPolicy::new().ledger_percent(percent);
        if let Some(max) = max {
            policy = policy.max_summary_tokens(max);
        }
        let texts: Vec<&str> = entries.iter().map(|&i| POOL[i]).collect();
        let tokens: Vec<usize> = texts.iter().map(|t| ledger::entry_tokens(t, &counter)).collect();
        let prose = words.iter().map(|&i| WORDS[i]).collect::<Vec<_>>().join(" ");
        let held_set: Vec<&str> = (texts.iter().zip(&held_mask)).filter(|(_, h)| **h).map(|(t, _)| *t).collect();
        let held = |e: &str| held_set.contains(&e);
        let fitted = fit_in(&policy, &prose, &texts, &tokens, &|i| held(texts[i]), limit, &counter, exact);
        let shown = ledger::Said::text(&fitted.body[..fitted.prose_len]);
        for (i, e) in texts.iter().enumerate() {
            let (listed, dropped) = (fitted.listed.contains(&i), fitted.dropped.contains(&i));
            proptest::prop_assert!(!(listed && dropped), "{e:?} listed and dropped");
            proptest::prop_assert!(
                listed || dropped || shown.holds(e) || held(e),
                "{e:?}: not listed, not held by {:?}, not dropped",
                &fitted.body[..fitted.prose_len]
            );
        }
    }
}

#[test]
fn recognises_content_arrays_and_rejects_other_roles() {
    let policy = FoldPolicy::new();
    let mut m = policy.summary_message("x");
    m.content = Some(Content::Parts(vec![crate::message::Part::text(format!(
        "{DEFAULT_SUMMARY_PREFIX}x"
    ))]));
    assert_eq!(policy.summary_text(&m).as_deref(), Some("x"));
    let user = Message::user(format!("{DEFAULT_SUMMARY_PREFIX}x"));
    assert!(!policy.is_summary(&user));
}
