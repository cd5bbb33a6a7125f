//! The extractive summarizer over long folded spans: it covers the whole
//! span (the opening request, decisions from every part of it, the open
//! question, the tool error), fits its allowance, is deterministic, and
//! rolls its start forward through many stateless compactions.

mod common;

use chatfold::testing::Histories;
use chatfold::{
    Compactor, Extractive, Heuristic, Message, Part, Role, Summarizer, SummaryRequest, TokenCounter, ToolCall,
};
use proptest::prelude::*;
use serde_json::json;

const OPENING: &str = "Please build the Halvorsen ingest pipeline for the Oslo office.";
const DECISIONS: [(usize, &str); 3] = [
    (13, "We decided to keep raw files in the Svalbard bucket."),
    (65, "Let's switch the parser to the streaming Fjord reader."),
    (117, "We agreed to page the Bergen channel on every failed load."),
];
const OPEN_QUESTION: &str = "Can the Tromsø mirror hold the Lofoten archives too?";
const ERROR_ROUND: usize = 77;
const ROUNDS: usize = 130;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    OpenAi,
    Anthropic,
}

/// One round of the generated span: a user turn, a tool call and its
/// result, an assistant answer (four messages).
fn round(r: usize, form: Form) -> Vec<Message> {
    let user = match r {
        0 => format!("{OPENING} It must read the nightly CSV drops and never lose a row."),
        40 => OPEN_QUESTION.to_owned(),
        _ if r % 3 == 0 => format!("How is batch {r} loading?"),
        _ if r % 5 == 0 => format!("Use batch size {} for the next run.", r * 10),
        _ => format!("Note for round {r}: the file count was {}.", r * 3),
    };
    let answer = match DECISIONS.iter().find(|(at, _)| *at == r) {
        Some((_, decision)) => format!("Looked at the options. {decision}"),
        None if r % 3 == 0 => format!("Batch {r} is loading fine, {} rows so far.", r * 100),
        None => format!("Noted round {r}."),
    };
    let failed = r == ERROR_ROUND;
    let result = match failed {
        true => format!("ERROR: permission denied on /data/raw/{r}.csv"),
        false => format!("loaded {} rows in 3s", r * 7),
    };
    let id = format!("call_{r}");
    let mut out = vec![Message::user(user)];
    match form {
        Form::OpenAi => {
            out.push(Message::assistant_tool_calls(vec![ToolCall::new(
                id.clone(),
                "load_batch",
                format!(r#"{{"batch":{r}}}"#),
            )]));
            out.push(Message::tool(result, id));
        }
        Form::Anthropic => {
            out.push(Message::assistant("").with_parts(vec![
                Part::text("Loading."),
                Part::from_json(
                    json!({"type": "tool_use", "id": id, "name": "load_batch", "input": {"batch": r}}),
                ),
            ]));
            let mut block = json!({"type": "tool_result", "tool_use_id": id, "content": result});
            if failed {
                block["is_error"] = json!(true);
            }
            out.push(Message::user("").with_parts(vec![Part::from_json(block)]));
        }
    }
    out.push(Message::assistant(answer));
    out
}

fn span(form: Form) -> Vec<Message> {
    (0..ROUNDS).flat_map(|r| round(r, form)).collect()
}

/// The lines of `summary` under `heading`.
fn section<'s>(summary: &'s str, heading: &str) -> Vec<&'s str> {
    summary
        .lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| !l.ends_with(':') || l.contains(": "))
        .collect()
}

/// Which third of `folded` the line `line` was taken from.
fn third_of(folded: &[Message], line: &str) -> Option<usize> {
    let said = line.split_once(": ").map_or(line, |(_, t)| t);
    let said = said.trim_end_matches('…');
    let i = folded.iter().position(|m| m.text().contains(said))?;
    Some(i * 3 / folded.len())
}

fn check_coverage(folded: &[Message], summary: &str, allowance: usize, counter: &dyn Fn(&str) -> usize) {
    assert!(
        counter(summary) <= allowance,
        "{} > {allowance}:\n{summary}",
        counter(summary)
    );
    assert!(summary.contains(OPENING), "{summary}");
    let decided = section(summary, "Decided:");
    let thirds: Vec<usize> = decided.iter().filter_map(|l| third_of(folded, l)).collect();
    for third in 0..3 {
        assert!(
            thirds.contains(&third),
            "no decision from third {third}:\n{summary}"
        );
    }
    assert!(
        section(summary, "Open questions:")
            .iter()
            .any(|l| l.contains(OPEN_QUESTION)),
        "{summary}"
    );
    assert!(
        summary.contains("permission denied on /data/raw/77.csv"),
        "{summary}"
    );
    // Answered questions are not open.
    assert!(
        !section(summary, "Open questions:")
            .iter()
            .any(|l| l.contains("loading?")),
        "{summary}"
    );
}

#[test]
fn a_long_span_is_covered_from_its_start_to_its_end() {
    for form in [Form::OpenAi, Form::Anthropic] {
        let folded = span(form);
        assert!(folded.len() >= 500);
        for allowance in [300, 600, 1500] {
            let request = SummaryRequest::new(None, &folded, allowance);
            let summary = Extractive::new().summarize(&request).unwrap();
            check_coverage(&folded, &summary, allowance, &|t| Heuristic.count(t));
            // Deterministic.
            assert_eq!(Extractive::new().summarize(&request).unwrap(), summary);
            if allowance == 600 && form == Form::OpenAi {
                println!("{summary}");
            }
        }
    }
}

#[cfg(feature = "tiktoken")]
#[test]
fn a_long_span_fits_an_exact_counter() {
    let o200k = chatfold::Tiktoken::o200k_base().unwrap();
    let folded = span(Form::OpenAi);
    for allowance in [300, 800] {
        let request = SummaryRequest::new(None, &folded, allowance);
        let summary = Extractive::with_counter(o200k).summarize(&request).unwrap();
        check_coverage(&folded, &summary, allowance, &|t| o200k.count(t));
    }
}

/// Thirty stateless compactions, each fed back with new turns: the summary
/// still says how the conversation began.
#[test]
fn the_start_survives_thirty_stateless_compactions() {
    for form in [Form::OpenAi, Form::Anthropic] {
        let compactor = Compactor::new(1500);
        let mut history = vec![Message::system("You run data pipelines.")];
        history.extend(round(0, form));
        let mut next_round = 1;
        for step in 0..30 {
            for _ in 0..6 {
                history.extend(round(next_round, form));
                next_round += 1;
            }
            let result = compactor.compact(&history, &Extractive::new()).unwrap();
            assert!(result.tokens_after <= 1500, "step {step}");
            history = result.messages.into_owned();
        }
        let summaries: Vec<&Message> = history
            .iter()
            .filter(|m| compactor.policy.is_summary(m))
            .collect();
        assert_eq!(summaries.len(), 1);
        let text = summaries[0].text();
        if form == Form::Anthropic {
            println!("{text}");
        }
        assert!(text.contains(OPENING), "{form:?}:\n{text}");
        assert!(text.contains("Started with:"), "{text}");
        // The decisions of the first rounds are still there too.
        assert!(
            text.contains(DECISIONS[0].1) || text.contains(DECISIONS[1].1),
            "{text}"
        );
    }
}

fn odd_messages() -> Vec<Vec<Message>> {
    let mut null = Message::assistant("");
    null.content = None;
    vec![
        vec![
            Message::user("日本語のテキストです。とても長い文章になります。"),
            Message::assistant("はい、分かりました！"),
        ],
        vec![Message::user(
            "🎉🎉🎉 party time 🎉 with émojis and accents: café, naïve?",
        )],
        vec![Message::user(""), Message::assistant("   "), null.clone()],
        vec![null.clone()],
        vec![Message::new(
            Role::from("narrator"),
            "The ship sailed at dawn. Nobody noticed.",
        )],
        vec![Message::tool("orphan result with no call", "ghost")],
        vec![Message::user("x".repeat(5000))],
        vec![Message::user(
            "supercalifragilisticexpialidocious-and-more-without-spaces",
        )],
        span(Form::OpenAi),
        span(Form::Anthropic),
    ]
}

#[test]
fn tiny_allowances_give_a_short_non_empty_summary() {
    for folded in odd_messages() {
        for allowance in 0..=20 {
            for previous in [
                None,
                Some("Started with:\nuser: the first ask\nDecided:\nassistant: we will go"),
            ] {
                let request = SummaryRequest::new(previous, &folded, allowance);
                let summary = Extractive::new().summarize(&request).unwrap();
                assert!(!summary.trim().is_empty(), "{allowance}");
                let one_word = !summary.contains(char::is_whitespace);
                assert!(
                    Heuristic.count(&summary) <= allowance || one_word,
                    "{allowance}: {summary:?}"
                );
            }
        }
    }
}

#[test]
fn odd_messages_summarize_without_panics_at_any_size() {
    for folded in odd_messages() {
        for allowance in [25, 60, 200, 5000] {
            let summary = Extractive::new()
                .summarize(&SummaryRequest::new(None, &folded, allowance))
                .unwrap();
            assert!(!summary.is_empty());
            let one_word = !summary.contains(char::is_whitespace);
            assert!(
                Heuristic.count(&summary) <= allowance || one_word,
                "{allowance}: {summary}"
            );
        }
    }
    let narrator = Extractive::new()
        .summarize(&SummaryRequest::new(None, &odd_messages()[4], 100))
        .unwrap();
    assert!(
        narrator.contains("narrator: The ship sailed at dawn."),
        "{narrator}"
    );
}

proptest! {
    #![proptest_config(common::cases(64))]

    /// Any generated history, any allowance: a non-empty summary within it
    /// (or a single word), the same twice.
    #[test]
    fn generated_histories_fit(h in Histories::new().max_turns(40).strategy(), allowance in 0usize..400, previous in proptest::option::of("[a-z ?.\n]{0,80}")) {
        let request = SummaryRequest::new(previous.as_deref(), &h, allowance);
        let summary = Extractive::new().summarize(&request).unwrap();
        prop_assert!(!summary.trim().is_empty());
        prop_assert!(Heuristic.count(&summary) <= allowance || !summary.contains(char::is_whitespace), "{summary:?}");
        prop_assert_eq!(Extractive::new().summarize(&request).unwrap(), summary);
    }
}
