//! `Compactor::compact_view`: a plain history compacted where the caller
//! holds it gives, for every history and configuration, the result the
//! whole reading gives, or says to read it whole.

mod common;

use std::convert::Infallible;

use chatfold::testing::Histories;
use chatfold::{
    Compactor, DEFAULT_SUMMARY_PREFIX, Fate, FoldPolicy, Message, Pin, SummaryRequest, View, ViewCompaction,
};
use common::cases;
use proptest::prelude::*;

/// Plain histories: roles a binding meets (custom ones too), texts of
/// every kind the generators make, and now and then a previous summary.
fn plain(max: usize) -> impl Strategy<Value = Vec<(String, String)>> {
    let role = prop::sample::select(vec![
        "user",
        "user",
        "user",
        "assistant",
        "assistant",
        "system",
        "developer",
        "critic",
    ]);
    let text = Histories::new().long(600).text();
    let message = prop_oneof![
        12 => (role, text.clone()).prop_map(|(r, t)| (r.to_owned(), t)),
        1 => text.prop_map(|t| ("system".to_owned(), format!("{DEFAULT_SUMMARY_PREFIX}{t}"))),
    ];
    prop::collection::vec(message, 0..max)
}

fn compactor(budget: usize, keep: Option<usize>, fold_to: Option<usize>, strict: bool) -> Compactor {
    let mut c = Compactor::new(budget)
        .policy(FoldPolicy::new().ledger(false))
        .strict(strict);
    c.keep_recent = keep;
    c.fold_to = fold_to.filter(|&f| f <= budget);
    c
}

/// The summary both readings are given: what each was asked, so that a
/// difference in the request shows in the output.
fn summary(previous: Option<&str>, messages: &[Message], allowance: usize) -> String {
    let texts: Vec<String> = messages
        .iter()
        .map(|m| format!("{}={}", m.role, m.text()))
        .collect();
    format!(
        "prev {previous:?} allowance {allowance} folded {}",
        texts.join("|")
    )
}

/// The output a view compaction lays out, as messages.
fn laid(view: &[(String, String)], done: &ViewCompaction) -> Vec<Message> {
    let whole = view.messages();
    let mut out: Vec<Message> = done.hoisted.iter().map(|&i| whole[i].clone()).collect();
    out.extend(done.summary.clone());
    out.extend(whole[done.kept.clone()].iter().cloned());
    out
}

proptest! {
    #![proptest_config(cases(512))]

    #[test]
    fn the_view_gives_the_whole_readings_result(
        h in plain(60),
        budget in 1usize..900,
        keep in prop::option::of(0usize..400),
        fold_to in prop::option::of(1usize..900),
        strict in any::<bool>(),
    ) {
        let c = compactor(budget, keep, fold_to, strict);
        let messages = h.as_slice().messages();
        let whole = c.compact(&messages, &|r: &SummaryRequest<'_>| {
            Ok::<_, Infallible>(summary(r.previous_summary(), &r.messages().cloned().collect::<Vec<_>>(), r.allowance()))
        });
        let (mut asked, mut lines) = (0, (0, 0));
        let view = c.compact_view(h.as_slice(), |r| {
            asked += 1;
            let mut transcript = String::new();
            r.transcript_into(&mut transcript);
            lines = (transcript.split('\n').count(), r.len());
            Ok::<_, Infallible>(summary(r.previous_summary(), &r.messages(), r.allowance()))
        });
        prop_assert!(asked <= 1);
        // One line or more per folded message.
        prop_assert!(lines.0 >= lines.1, "{:?}", lines);
        match (whole, view) {
            (Ok(whole), Ok(Some(view))) => {
                prop_assert_eq!(&laid(&h, &view), &whole.messages.to_vec());
                prop_assert_eq!(view.summarized, whole.summarized);
                prop_assert_eq!(view.tokens_before, whole.tokens_before);
                prop_assert_eq!(view.tokens_after, whole.tokens_after);
                prop_assert_eq!(view.over_budget, whole.over_budget);
                prop_assert_eq!(view.summary_truncated, whole.summary_truncated);
                prop_assert_eq!(view.prefix_tokens, whole.prefix_tokens);
                let fates = |r: &chatfold::Report| r.fates().collect::<Vec<Fate>>();
                prop_assert_eq!(fates(&view.report), fates(&whole.report));
                prop_assert_eq!(view.report.cut(), whole.report.cut());
                prop_assert_eq!(view.report.reason(), whole.report.reason());
                prop_assert_eq!(view.report.aligned_from(), whole.report.aligned_from());
                prop_assert_eq!(view.report.allowance(), whole.report.allowance());
                for i in 0..h.len() {
                    if let Some(t) = view.report.tokens(i) {
                        prop_assert_eq!(Some(t), whole.report.tokens(i), "message {}", i);
                    }
                }
            }
            // Read whole when the view cannot answer alone.
            (_, Ok(None)) => {}
            (Err(w), Err(v)) => prop_assert_eq!(w.to_string(), v.to_string()),
            (w, v) => prop_assert!(false, "whole {:?}, view {:?}", w.map(|c| c.messages.len()), v.map(|v| v.is_some())),
        }
    }

    #[test]
    fn configurations_that_read_the_folded_text_are_read_whole(
        h in plain(40),
        budget in 1usize..400,
        which in 0usize..3,
    ) {
        let mut c = compactor(budget, None, None, false);
        match which {
            0 => c.policy = FoldPolicy::new(),
            1 => c = c.pin(Pin::FirstUser),
            _ => c.max_fold_input_tokens = Some(100),
        }
        let mut asked = false;
        let view = c.compact_view(h.as_slice(), |_| {
            asked = true;
            Ok::<_, Infallible>("summary".to_owned())
        });
        prop_assert!(matches!(view, Ok(None)));
        prop_assert!(!asked);
    }
}

#[test]
fn a_long_history_is_read_in_place() {
    // 20 000 messages over a small budget: the plan stands the middle in
    // stand-ins and still answers.
    let h: Vec<(&str, String)> = (0..20_000)
        .map(|i| {
            (
                ["user", "assistant"][i % 2],
                format!("turn {i}: some words about item {i}"),
            )
        })
        .collect();
    let c = compactor(2_000, None, None, false);
    let mut folded = 0;
    let done = c
        .compact_view(h.as_slice(), |r| {
            folded = r.len();
            Ok::<_, Infallible>("the earlier turns".to_owned())
        })
        .unwrap()
        .expect("in place");
    assert_eq!(done.hoisted.len() + folded + done.kept.len(), h.len());
    assert!(done.tokens_after <= 2_000);
    assert_eq!(done.report.len(), h.len());
    assert_eq!(done.report.indices(Fate::Folded).count(), folded);
}

#[test]
fn a_summarizer_error_is_the_result_and_nothing_is_laid_out() {
    let h: Vec<(&str, String)> = (0..200)
        .map(|i| ("user", format!("message {i} {}", "x ".repeat(20))))
        .collect();
    let c = compactor(300, None, None, false);
    let err = c
        .compact_view(h.as_slice(), |_| Err::<String, _>("the model is down"))
        .unwrap_err();
    assert!(matches!(err, chatfold::Error::Summarize(_)), "{err}");
    let source = std::error::Error::source(&err).map(ToString::to_string);
    assert_eq!(source.as_deref(), Some("the model is down"));
}
