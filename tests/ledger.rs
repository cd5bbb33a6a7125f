//! The exact-identifier ledger: identifiers of folded turns survive any number
//! of compactions, within budget, exactly as they were written; and clearing
//! of old tool output.

mod common;

use std::convert::Infallible;

use chatfold::memory::{Memory, Remember, RollingMemory, Settings};
use chatfold::{
    ClearToolResults, Compactor, FoldPolicy, Heuristic, LEDGER_HEADING, Message, SummaryRequest, ToolCall,
};
use proptest::prelude::*;

/// A lossy summarizer: the first sentence of each folded turn, 60 words at most.
fn first_sentences(r: &SummaryRequest<'_>) -> Result<String, Infallible> {
    let mut words: Vec<String> = r
        .previous_summary()
        .map(|p| p.split_whitespace().take(20).map(str::to_owned).collect())
        .unwrap_or_default();
    for m in r.messages() {
        let text = m.text();
        let first = text.split(". ").next().unwrap_or("");
        words.extend(first.split_whitespace().map(str::to_owned));
    }
    words.truncate(60);
    let summary = words
        .into_iter()
        .filter(|w| {
            !w.contains('/') && !w.contains('-') && !w.contains('@') && !w.chars().any(|c| c.is_ascii_digit())
        })
        .collect::<Vec<_>>()
        .join(" ");
    Ok(if summary.is_empty() {
        "Earlier turns.".to_owned()
    } else {
        summary
    })
}

fn context_text(messages: &[Message]) -> String {
    messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

fn summary_entries(c: &Compactor, out: &[Message]) -> Vec<String> {
    out.iter()
        .filter(|m| c.policy.is_summary(m))
        .flat_map(|m| {
            let text = m.text().into_owned();
            match text.split_once(&format!("{LEDGER_HEADING}\n")) {
                Some((_, section)) => section
                    .lines()
                    .filter_map(|l| l.strip_prefix("- "))
                    .map(str::to_owned)
                    .collect(),
                None => Vec::new(),
            }
        })
        .collect()
}

#[test]
fn identifiers_survive_a_stateless_loop_with_a_lossy_summarizer() {
    let needles = [
        "550e8400-e29b-41d4-a716-446655440000",
        "/var/lib/postgres/data/pg_hba.conf",
        "https://grafana.example.com/d/api-latency",
        "PAY-4412",
        "10.20.30.40:5432",
        "9fceb02d0ae598e95dc970b74767f19372d61af8",
    ];
    // The whole budget for each fold: this measures the ledger, not the
    // fold target's cost in room (BENCHMARKS.md has that).
    let compactor = Compactor::new(600).fold_to(600);
    let mut history = vec![Message::system("You are an SRE assistant.")];
    for (i, needle) in needles.iter().enumerate() {
        history.push(Message::user(format!(
            "Note {i}. The thing to remember is {needle} for later."
        )));
        history.push(Message::assistant(format!("Noted item {i}.")));
    }
    let mut json_call = Message::assistant_tool_calls(vec![ToolCall::new(
        "c1",
        "lookup",
        r#"{"dataset": "sales_q3_2026"}"#,
    )]);
    json_call.content = None;
    history.push(json_call);
    history.push(Message::tool(
        r#"{"connection_id": "conn_994a82", "rows": 12}"#,
        "c1",
    ));
    for turn in 0..120 {
        history.push(Message::user(format!(
            "Turn {turn}: tell me something about the weather and the sea."
        )));
        history.push(Message::assistant(
            "The sea is calm and the weather is mild today, nothing more to add.",
        ));
        let result = compactor.compact(&history, &first_sentences).unwrap();
        assert!(result.tokens_after <= 600);
        history = result.messages.into_owned();
    }
    let context = context_text(&history);
    for needle in needles
        .iter()
        .chain(&["dataset: sales_q3_2026", "connection_id: conn_994a82"])
    {
        assert!(context.contains(needle), "{needle} lost:\n{context}");
    }
    assert_eq!(
        history.iter().filter(|m| compactor.policy.is_summary(m)).count(),
        1
    );
}

#[test]
fn with_the_ledger_off_the_summary_is_the_summarizers_text() {
    let compactor = Compactor::new(200).policy(FoldPolicy::new().ledger(false));
    let mut history: Vec<Message> = (0..30)
        .map(|i| Message::user(format!("Check /srv/data/{i}.csv please")))
        .collect();
    history.push(Message::user("last"));
    let summarize = |_: &SummaryRequest<'_>| Ok::<_, Infallible>("Files were checked.".to_owned());
    let result = compactor.compact(&history, &summarize).unwrap();
    assert_eq!(
        result.messages[0].text(),
        "Summary of earlier conversation:\nFiles were checked."
    );
    assert!(result.report.ledger().is_empty());
    let on = Compactor::new(200).compact(&history, &summarize).unwrap();
    assert!(on.messages[0].text().contains("\n- /srv/data/"));
    assert!(on.tokens_after <= 200);
}

#[test]
fn entries_the_prose_holds_are_not_repeated_and_the_report_lists_what_did_not_fit() {
    // The assistant's words: what the prose holds need not be listed.
    let mut history: Vec<Message> = (0..200)
        .map(|i| {
            Message::assistant(format!(
                "Host node-{i}.eu-west-1.compute.internal.example.com is up"
            ))
        })
        .collect();
    history.insert(0, Message::user("Which hosts are up?"));
    history.push(Message::user("Which hosts?"));
    let summarize = |_: &SummaryRequest<'_>| {
        Ok::<_, Infallible>(
            "Hosts node-199.eu-west-1.compute.internal.example.com and others were up.".to_owned(),
        )
    };
    let result = Compactor::new(300).compact(&history, &summarize).unwrap();
    let report = &result.report;
    assert!(!report.ledger().is_empty() && !report.ledger_dropped().is_empty());
    assert!(
        !report
            .ledger()
            .iter()
            .any(|e| e == "node-199.eu-west-1.compute.internal.example.com"),
        "held by the prose"
    );
    // Newest first: the newest folded host the prose does not hold (host
    // i is message i + 1).
    let folded = report.indices(chatfold::Fate::Folded).last().unwrap() - 1;
    let newest = (0..=folded).rev().find(|&h| h != 199).unwrap();
    assert_eq!(
        report.ledger()[0],
        format!("node-{newest}.eu-west-1.compute.internal.example.com"),
        "newest first"
    );
    let compactor = Compactor::new(300);
    assert_eq!(summary_entries(&compactor, &result.messages), report.ledger());
}

#[test]
fn what_the_user_gave_is_listed_first_under_its_heading() {
    let mut history = vec![Message::user(
        "My booking is BK-77120 and the host is node-1.example.com.",
    )];
    for i in 0..60 {
        history.push(Message::user(format!("Turn {i}: anything new?")));
        history.push(Message::assistant(format!(
            "Build b{i:04}f9c2a1 from run RUN-{i:05} deployed."
        )));
    }
    history.push(Message::user("Where are we?"));
    let summarize = |_: &SummaryRequest<'_>| Ok::<_, Infallible>("Builds were deployed.".to_owned());
    let result = Compactor::new(400).compact(&history, &summarize).unwrap();
    let text = result
        .messages
        .iter()
        .find(|m| m.text().starts_with("Summary"))
        .unwrap()
        .text();
    let section = text.split_once(LEDGER_HEADING).unwrap().1;
    // The user's entries under their own heading, first, though 120 turns
    // of the assistant's came after them: a later fold reads their tier
    // back from it.
    assert!(section.starts_with("\nGiven by the user:\n"), "{section}");
    let user_part = section.split("\nUsed by the assistant:").next().unwrap();
    assert!(user_part.contains("- BK-77120") && user_part.contains("- node-1.example.com"));
    assert!(result.tokens_after <= 400);
}

#[test]
fn memories_keep_a_ledger_too() {
    let mut memory = RollingMemory::new(Settings::new(120).summarizer(first_sentences)).unwrap();
    memory
        .add_user("Deploy build 7f3a9c21e to cluster prod-eu at https://deploy.example.com/runs/88.")
        .unwrap();
    for i in 0..40 {
        memory.add_user(format!("Turn {i}: chat about lunch.")).unwrap();
    }
    let context = memory.context();
    for needle in ["7f3a9c21e", "https://deploy.example.com/runs/88"] {
        assert!(context.contains(needle), "{needle} lost:\n{context}");
    }
    assert!(memory.summary().contains(LEDGER_HEADING));
}

fn logs(host: usize) -> String {
    format!("host-{host} /var/log/app-{host}.log line ok\n").repeat(60)
}

#[test]
fn clearing_old_tool_output_can_avoid_the_summarizer() {
    let mut history = vec![
        Message::system("SRE assistant."),
        Message::user("Read the logs of every host."),
    ];
    for i in 0..8 {
        history.push(Message::assistant_tool_calls(vec![ToolCall::new(
            format!("c{i}"),
            "read_logs",
            "{}",
        )]));
        history.push(Message::tool(logs(i), format!("c{i}")));
    }
    history.push(Message::assistant_tool_calls(vec![ToolCall::new(
        "m1", "memory", "{}",
    )]));
    history.push(Message::tool(
        "notes: ".to_owned() + &"remember this. ".repeat(100),
        "m1",
    ));
    history.push(Message::user("Summarize the errors."));
    let never =
        |_: &SummaryRequest<'_>| -> Result<String, Infallible> { panic!("no summarizer call expected") };
    let clearing = ClearToolResults::new().keep_recent(2).exclude("memory");
    let compactor = Compactor::new(3_000).clear_tool_results(clearing);
    let result = compactor.compact(&history, &never).unwrap();
    assert!(!result.summarized && !result.over_budget);
    let cleared = result.report.cleared();
    assert_eq!(
        cleared,
        [3, 5, 7, 9, 11, 13, 15],
        "all but the newest two, the excluded tool's kept"
    );
    for &i in cleared {
        let m = &result.messages[i];
        assert_eq!(m.tool_call_id, history[i].tool_call_id, "still answers its call");
        let text = m.text();
        assert!(text.starts_with(&format!(
            "[tool result cleared: read_logs (call {})",
            history[i].tool_call_id.as_deref().unwrap()
        )));
        let host = (i - 3) / 2;
        assert!(
            text.contains(&format!("/var/log/app-{host}.log")),
            "identifiers named: {text}"
        );
    }
    assert_eq!(result.messages[17], history[17], "the newest results stay");
    assert_eq!(result.messages[19], history[19], "excluded tools stay");
    assert_eq!(result.messages.len(), history.len());
    // Without clearing, the same history needs a summary.
    assert!(
        Compactor::new(3_000)
            .compact(&history, &first_sentences)
            .unwrap()
            .summarized
    );
}

proptest! {
    #![proptest_config(common::cases(64))]

    /// Compacting with clearing is compacting the cleared history: every
    /// rule holds on it, and the placeholders still answer their calls.
    #[test]
    fn rules_hold_with_clearing(h in common::history(40), budget in 20usize..400, keep in 0usize..3) {
        let clearing = ClearToolResults::new().keep_recent(keep).min_tokens(5);
        let plain = Compactor::new(budget).keep_recent(budget / 2).counter(Heuristic);
        let c = plain.clone().clear_tool_results(clearing.clone());
        let summarize = |_: &SummaryRequest<'_>| Ok::<_, Infallible>("a short summary".to_owned());
        let (cleared, indices) = clearing.clear(&h, &Heuristic).unwrap_or((h.clone(), Vec::new()));
        for &i in &indices {
            prop_assert_eq!(&cleared[i].tool_call_id, &h[i].tool_call_id);
            prop_assert_eq!(&cleared[i].role, &h[i].role);
        }
        let with = c.compact(&h, &summarize).unwrap();
        if chatfold::TokenCounter::count_messages(&Heuristic, &h) <= budget {
            // Within the budget nothing is cleared: results are cleared at a
            // fold, in one batch (rule 10).
            prop_assert_eq!(&*with.messages, &h[..]);
            prop_assert!(with.report.cleared().is_empty());
            return Ok(());
        }
        let without = plain.compact(&cleared, &summarize).unwrap();
        prop_assert_eq!(&*with.messages, &*without.messages);
        prop_assert_eq!(with.report.cleared(), &indices[..]);
        let _ = common::check_rules(&plain, &cleared, "a short summary");
    }

    /// Ledger entries are exact: each is a substring of the folded messages
    /// as they say it (a JSON string unescaped; a `key: value` entry's key
    /// and value both are).
    #[test]
    fn entries_are_exact_substrings_of_the_folded_turns(h in common::history(40), budget in 40usize..300) {
        let c = Compactor::new(budget);
        let plan = c.plan(&h).unwrap();
        let Some(request) = plan.folded() else { return Ok(()); };
        let folded = request.messages().map(|m| {
            let mut t = said(&m.text());
            for call in &m.tool_calls { t.push('\n'); t.push_str(&said(&call.arguments)); }
            t
        }).collect::<Vec<_>>().join("\n");
        let previous = request.previous_summary().unwrap_or("").to_owned();
        for entry in request.ledger() {
            let exact = |s: &str| folded.contains(s) || previous.contains(s);
            let ok = exact(entry) || entry.split_once(": ").is_some_and(|(k, v)| exact(k) && exact(v));
            prop_assert!(ok, "{entry:?} is in no folded message");
        }
        let result = plan.apply("short summary").unwrap();
        for entry in result.report.ledger() {
            prop_assert!(request_has(&folded, &previous, entry));
        }
    }

    /// A growing history compacted 50 times in a row, each result fed back:
    /// every identifier of the first turns is still in the context.
    #[test]
    fn a_ledger_survives_fifty_stateless_compactions(ids in prop::collection::vec(common::identifier(), 1..6), filler in common::history(8)) {
        let compactor = Compactor::new(900);
        let mut history: Vec<Message> = ids.iter().map(|id| Message::user(format!("Remember {id} please."))).collect();
        for turn in 0..50 {
            // Ordinary turns only: pinned ones would pile up and take the budget.
            let ordinary = |m: &&Message| matches!(m.role, chatfold::Role::User | chatfold::Role::Assistant) && m.tool_calls.is_empty() && m.tool_call_id.is_none();
            history.extend(filler.iter().filter(ordinary).cloned());
            history.push(Message::user(format!("turn {turn} with some words about nothing in particular")));
            let result = compactor.compact(&history, &first_sentences).unwrap();
            prop_assert!(result.tokens_after <= 900 || result.over_budget);
            history = result.messages.into_owned();
        }
        let context = context_text(&history);
        for id in &ids {
            prop_assert!(context.contains(id.as_str()), "{} lost", id);
        }
    }

    /// A summarizer that keeps nothing, twenty stateless compactions, both
    /// formats: every identifier of the folded turns (in user text, tool
    /// call arguments or `tool_use` inputs, tool results) is still in the
    /// context, verbatim, when they all fit the summary's room.
    #[test]
    fn every_identifier_that_fits_survives_a_summarizer_that_drops_everything(
        ids in prop::collection::vec(common::identifier(), 1..9),
        anthropic in any::<bool>(),
    ) {
        let nothing = |_: &SummaryRequest<'_>| Ok::<_, Infallible>("Nothing to keep.".to_owned());
        let compactor = Compactor::new(1_200).fold_to(1_200);
        let mut history = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let call = format!("call_{i}");
            match (i % 3, anthropic) {
                (0, _) => history.push(Message::user(format!("Please look at {id} first."))),
                (1, false) => {
                    // Arguments as a client writes them: JSON, escapes and all.
                    let arguments = serde_json::json!({"target": id}).to_string();
                    history.push(Message::assistant_tool_calls(vec![ToolCall::new(call.clone(), "open", arguments)]));
                    history.push(Message::tool("opened", call));
                }
                (_, false) => {
                    history.push(Message::assistant_tool_calls(vec![ToolCall::new(call.clone(), "find", "{}")]));
                    history.push(Message::tool(format!("found {id} in the index"), call));
                }
                (1, true) => {
                    let m: Message = serde_json::from_value(serde_json::json!({"role": "assistant", "content": [
                        {"type": "tool_use", "id": call, "name": "open", "input": {"target": id}}]})).unwrap();
                    history.push(m);
                    history.push(serde_json::from_value(serde_json::json!({"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": call, "content": "opened"}]})).unwrap());
                }
                (_, true) => {
                    let m: Message = serde_json::from_value(serde_json::json!({"role": "assistant", "content": [
                        {"type": "tool_use", "id": call, "name": "find", "input": {}}]})).unwrap();
                    history.push(m);
                    history.push(serde_json::from_value(serde_json::json!({"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": call, "content": format!("found {id} in the index")}]})).unwrap());
                }
            }
            history.push(Message::assistant("Done."));
        }
        for turn in 0..20 {
            for k in 0..6 {
                history.push(Message::user(format!("turn {turn}.{k}: a question about nothing in particular")));
                history.push(Message::assistant("An answer about nothing in particular, at some length."));
            }
            let result = compactor.compact(&history, &nothing).unwrap();
            prop_assert!(result.tokens_after <= 1_200 || result.over_budget);
            history = result.messages.into_owned();
        }
        let context = serde_json::to_string(&history).unwrap();
        let text = context_text(&history);
        for id in &ids {
            let escaped = serde_json::to_string(id).unwrap();
            prop_assert!(text.contains(id.as_str()) || context.contains(escaped.trim_matches('"')), "{} lost: {}", id, text);
        }
    }

    /// A previous summary without a ledger section is read back whole, as prose.
    #[test]
    fn a_summary_without_a_section_is_all_prose(prose in "[a-zA-Z .,\\n]{1,200}") {
        let prose = prose.trim().to_owned();
        prop_assume!(!prose.is_empty());
        let c = Compactor::new(60).policy(FoldPolicy::new().ledger(false));
        let mut h = vec![c.policy.summary_message(&prose)];
        h.extend((0..30).map(|i| Message::user(format!("message {i}"))));
        let on = Compactor::new(60);
        let plan = on.plan(&h).unwrap();
        let request = plan.folded().unwrap();
        prop_assert_eq!(request.previous_summary(), Some(prose.as_str()));
    }

    /// Extraction never panics on arbitrary text, and the result is within budget.
    #[test]
    fn arbitrary_unicode_never_panics(texts in prop::collection::vec(any::<String>(), 1..20)) {
        let mut h: Vec<Message> = texts.iter().map(Message::user).collect();
        h.push(Message::user("end"));
        let _ = common::check_rules(&Compactor::new(50), &h, "summary");
    }
}

/// What `text` says: itself, and when it is JSON, each of its strings as
/// it reads unescaped (the ledger reads `"C:\\\\x.log"` as `C:\\x.log`).
fn said(text: &str) -> String {
    fn strings(value: &serde_json::Value, out: &mut String) {
        match value {
            serde_json::Value::String(s) => {
                out.push('\n');
                out.push_str(s);
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
            serde_json::Value::Object(members) => members.iter().for_each(|(k, v)| {
                strings(&serde_json::Value::String(k.clone()), out);
                strings(v, out);
            }),
            _ => {}
        }
    }
    let mut out = text.to_owned();
    for line in std::iter::once(text).chain(text.lines()) {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(line) {
            strings(&value, &mut out);
        }
    }
    out
}

fn request_has(folded: &str, previous: &str, entry: &str) -> bool {
    let exact = |s: &str| folded.contains(s) || previous.contains(s);
    exact(entry) || entry.split_once(": ").is_some_and(|(k, v)| exact(k) && exact(v))
}

/// A summary allowed no tokens leaves the ledger no room to read: the
/// compaction ends (it once read the same piece forever) and folds.
#[test]
fn a_summary_allowed_no_tokens_still_compacts() {
    let history: Vec<Message> = (0..40)
        .map(|i| match i % 2 {
            0 => Message::user(format!(
                "Turn {i}: check /srv/app/{i}.log on db-{i}.internal please."
            )),
            _ => Message::assistant(format!("Turn {i}: done, /srv/app/{i}.log is clean.")),
        })
        .collect();
    let compactor = Compactor::new(200)
        .keep_recent(40)
        .policy(FoldPolicy::new().max_summary_tokens(0));
    let summarize = |_: &SummaryRequest<'_>| Ok::<_, Infallible>("Checked the logs.".to_owned());
    for _ in 0..2 {
        let result = compactor.compact(&history, &summarize).unwrap();
        assert!(result.summarized);
        assert!(result.messages.len() < history.len());
    }
}

proptest! {
    #![proptest_config(common::cases(24))]

    /// What the user gave survives a busy session: however many ids the
    /// model and its tools add in the turns after it, folded again and
    /// again (each output sent back with the next turn), every identifier
    /// the user stated is still in the context, and the context is within
    /// the budget.
    #[test]
    fn tool_ids_never_push_out_what_the_user_gave(
        given in proptest::collection::vec(1000u32..99_999, 1..6),
        busy in 20usize..80,
        budget in 500usize..1_500,
        seed in 0u32..1_000,
    ) {
        let compactor = Compactor::new(budget);
        let stated: Vec<String> = given.iter().map(|n| format!("BK-{n}")).collect();
        let mut context = vec![Message::system("You help with bookings.")];
        context.push(Message::user(format!("My bookings are {}.", stated.join(" and "))));
        context.push(Message::assistant("Noted."));
        for turn in 0..busy {
            let n = seed as usize * 7919 + turn;
            context.push(Message::user(format!("Turn {turn}: anything new?")));
            context.push(Message::assistant_tool_calls(vec![ToolCall::new(
                format!("call_{n}"),
                "status",
                format!(r#"{{"request_id":"req_{n:08x}"}}"#),
            )]));
            context.push(Message::tool(format!(r#"{{"build":"b{n:06x}f9","run":"RUN-{n:05}"}}"#), format!("call_{n}")));
            context.push(Message::assistant(format!("Deployed b{n:06x}f9 from /srv/builds/{n}/out.tar.")));
            let result = compactor.compact(&context, &first_sentences).unwrap();
            prop_assert!(result.tokens_after <= budget);
            context = result.messages.into_owned();
        }
        let text: String = context.iter().map(|m| m.text()).collect::<Vec<_>>().join("\n");
        for id in &stated {
            prop_assert!(text.contains(id.as_str()), "{id} lost at {budget}:\n{text}");
        }
    }
}
