//! Anthropic Messages request bodies: read and written back losslessly, and
//! compacted into requests Anthropic accepts, again and again.

use chatfold::error::InputError;
use chatfold::{Compactor, Error, Extractive, Format, History, Message, SummaryRequest};
use serde_json::{Value, json};

const SAMPLE: &str = include_str!("../examples/anthropic_request.json");

#[test]
fn a_request_body_reads_and_writes_back_unchanged() {
    let history = History::from_json_str(SAMPLE).unwrap();
    assert_eq!(history.format(), Format::Anthropic);
    // The two system blocks lead, as system messages; the conversation follows.
    assert_eq!(history.messages.len(), 2 + 7);
    assert_eq!(
        history.messages[0].text(),
        "You are a travel agent for Seoul trips."
    );
    assert_eq!(history.field("model"), Some(&json!("claude-sonnet-4-5")));
    assert_eq!(history.field("system"), None);
    let original: Value = serde_json::from_str(SAMPLE).unwrap();
    assert_eq!(history.to_json(), original);
    // A string system prompt stays a string.
    let text =
        json!({"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5});
    let history = History::from_json_value(text.clone()).unwrap();
    assert_eq!(history.format(), Format::Anthropic);
    assert_eq!(history.to_json(), text);
}

#[test]
fn tool_use_and_its_results_are_one_unit() {
    let history = History::from_json_str(SAMPLE).unwrap();
    // Messages 3 (tool_use x2) and 4 (their results) travel together.
    assert_eq!(
        history.messages[3].call_ids().collect::<Vec<_>>(),
        ["toolu_01A", "toolu_01B"]
    );
    assert_eq!(
        history.messages[4].answered_ids().collect::<Vec<_>>(),
        ["toolu_01A", "toolu_01B"]
    );
    assert!(history.messages[4].is_response());
    for cut in 0..=history.messages.len() {
        let kept = &history.messages[cut..];
        let split = kept.first().is_some_and(|m| m.answered_ids().next().is_some());
        assert!(
            !split || !chatfold::testing::is_boundary(&history.messages, cut),
            "cut {cut}"
        );
    }
}

#[test]
fn mixed_and_wrong_formats_are_refused_with_their_marks() {
    let mixed = json!({"system": "s", "messages": [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "c", "content": "r"}]});
    let err = History::from_json_value(mixed).unwrap_err();
    let Error::InvalidInput(InputError::MixedFormats { first, second }) = &err else {
        panic!("{err}");
    };
    assert_eq!((first.0, second.0), (Format::Anthropic, Format::OpenAi));
    assert_eq!((first.1.message(), second.1.message()), (None, Some(1)));

    let openai = json!([{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]);
    let err = History::from_json_value(openai)
        .unwrap()
        .into_format(Format::Anthropic)
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidInput(InputError::WrongFormat { .. })),
        "{err}"
    );
    // Plain text reads the same in both: it takes the format asked for.
    let plain = json!({"messages": [{"role": "user", "content": "q"}]});
    let history = History::from_json_value(plain).unwrap();
    assert_eq!(history.format(), Format::OpenAi);
    assert_eq!(
        history.into_format(Format::Anthropic).unwrap().format(),
        Format::Anthropic
    );

    let bad_block = json!({"system": "s", "messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]});
    let err = History::from_json_value(bad_block).unwrap_err();
    let Error::InvalidMessage { index: 0, problem } = &err else {
        panic!("{err}")
    };
    assert_eq!(
        (problem.field(), problem.found()),
        ("content[0].tool_use_id", None)
    );

    let bad_system = json!({"system": [{"type": "text", "text": 3}], "messages": []});
    let err = History::from_json_value(bad_system).unwrap_err();
    let Error::InvalidInput(InputError::Field(field)) = &err else {
        panic!("{err}")
    };
    assert_eq!(field.field(), "system[0].text");
}

/// Turn `i` of a trip-planning conversation: a question, a tool exchange
/// (two calls, both answered in the next user message, as Anthropic
/// requires), and an answer.
fn turn(i: usize) -> Vec<Value> {
    vec![
        json!({"role": "user", "content": format!("Day {i}: what should I see? Budget {i}0,000 KRW.")}),
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": format!("Plan day {i}."), "signature": format!("sig{i}")},
            {"type": "tool_use", "id": format!("toolu_{i}a"), "name": "search", "input": {"q": format!("day {i} sights")}},
            {"type": "tool_use", "id": format!("toolu_{i}b"), "name": "search", "input": {"q": format!("day {i} food")}}
        ]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i}a"), "content": format!("Palace {i}, museum {i}, market {i}.")},
            {"type": "tool_result", "tool_use_id": format!("toolu_{i}b"), "content": [{"type": "text", "text": format!("Noodles at stall {i}.")}]}
        ]}),
        json!({"role": "assistant", "content": format!("Day {i}: palace {i} in the morning, noodles at stall {i}.")}),
    ]
}

/// What Anthropic checks of a request: the first turn is a user turn
/// without tool results, every `tool_result` answers a `tool_use` of the
/// assistant message just before it, and every `tool_use` is answered in
/// the next message.
fn assert_anthropic_accepts(body: &Value) {
    let messages = body["messages"].as_array().unwrap();
    let blocks = |m: &Value, kind: &str, key: &str| -> Vec<String> {
        m["content"]
            .as_array()
            .map(|b| {
                b.iter()
                    .filter(|b| b["type"] == kind)
                    .map(|b| b[key].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let first = &messages[0];
    assert_eq!(first["role"], "user", "{body}");
    assert!(blocks(first, "tool_result", "tool_use_id").is_empty(), "{body}");
    for (i, m) in messages.iter().enumerate() {
        assert!(
            m["role"] == "user" || m["role"] == "assistant",
            "message {i}: {m}"
        );
        let results = blocks(m, "tool_result", "tool_use_id");
        if !results.is_empty() {
            let calls = blocks(&messages[i - 1], "tool_use", "id");
            assert!(
                results.iter().all(|r| calls.contains(r)),
                "message {i}: {results:?} vs {calls:?}"
            );
        }
        let calls = blocks(m, "tool_use", "id");
        if !calls.is_empty() && i + 1 < messages.len() {
            let answered = blocks(&messages[i + 1], "tool_result", "tool_use_id");
            assert!(
                calls.iter().all(|c| answered.contains(c)),
                "message {i}: {calls:?} unanswered"
            );
        }
    }
}

/// A stateless server compacting before each of 300 requests, the client
/// sending back what it got plus one more turn: one summary, in `system`
/// after the caller's blocks (their `cache_control` kept), within budget,
/// and never a request Anthropic would reject.
#[test]
fn the_stateless_loop_keeps_one_summary_and_valid_requests() {
    let system = json!([
        {"type": "text", "text": "You are a travel agent.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Quote prices in KRW."}
    ]);
    let compactor = Compactor::new(1500).keep_recent(600);
    let summarize = |r: &SummaryRequest<'_>| {
        Ok::<_, std::convert::Infallible>(format!(
            "Planned {} messages of the trip so far.",
            r.messages().len()
        ))
    };
    let mut body = json!({"model": "claude-sonnet-4-5", "max_tokens": 512, "system": system, "messages": []});
    let mut summaries = 0;
    for i in 0..300 {
        let turns = turn(i);
        body["messages"].as_array_mut().unwrap().extend(turns);
        let history = History::from_json_value(body.clone()).unwrap();
        assert_eq!(history.format(), Format::Anthropic);
        let result = compactor.compact(&history.messages, &summarize).unwrap();
        assert!(
            result.tokens_after <= 1500,
            "request {i}: {} tokens",
            result.tokens_after
        );
        body = history.to_json_with(&result.messages);
        assert_anthropic_accepts(&body);
        let blocks = body["system"].as_array().unwrap();
        assert_eq!(
            blocks[..2],
            system.as_array().unwrap()[..],
            "request {i}: the caller's blocks"
        );
        let summary_blocks = blocks[2..].len();
        assert!(summary_blocks <= 1, "request {i}: {body}");
        if summary_blocks == 1 {
            summaries += 1;
            let text = blocks[2]["text"].as_str().unwrap();
            assert!(text.starts_with(&*compactor.policy.summary_prefix), "{text}");
        }
    }
    assert!(summaries > 250, "the conversation was folded: {summaries}");
}

#[test]
fn the_summary_can_lead_as_a_user_turn_instead() {
    let mut messages = Vec::new();
    for i in 0..30 {
        messages.extend(turn(i));
    }
    let body = json!({"system": "Be brief.", "messages": messages});
    let history = History::from_json_value(body).unwrap();
    let policy = chatfold::FoldPolicy::new().summary_role("user");
    let result = Compactor::new(800)
        .policy(policy.clone())
        .compact(&history.messages, &Extractive::new())
        .unwrap();
    let out = history.to_json_with(&result.messages);
    assert_eq!(out["system"], "Be brief.");
    let first: Message = serde_json::from_value(out["messages"][0].clone()).unwrap();
    assert!(policy.is_summary(&first));
    assert_anthropic_accepts(&out);
}

/// No Claude tokenizer runs offline. On the published counts
/// (`tests/fixtures/anthropic_counts.json`, each with its source), o200k
/// comes closer than the heuristic, which is why the CLI's default
/// (`o200k_base`) stays for Anthropic bodies and README says so.
#[cfg(feature = "tiktoken")]
#[test]
fn o200k_is_the_closer_approximation_on_published_claude_counts() {
    use chatfold::{Heuristic, Tiktoken, TokenCounter};
    let fixture: Value = serde_json::from_str(include_str!("fixtures/anthropic_counts.json")).unwrap();
    let o200k = Tiktoken::o200k_base().unwrap();
    let (mut heuristic_off, mut o200k_off) = (0, 0);
    for case in fixture["cases"].as_array().unwrap() {
        let history = History::from_json_value(case["request"].clone())
            .and_then(|h| h.into_format(Format::Anthropic))
            .unwrap();
        let claude = case["input_tokens"].as_u64().unwrap() as usize;
        heuristic_off += Heuristic.count_messages(&history.messages).abs_diff(claude);
        o200k_off += o200k.count_messages(&history.messages).abs_diff(claude);
    }
    println!("off by: o200k {o200k_off}, heuristic {heuristic_off}");
    assert!(
        o200k_off <= heuristic_off,
        "o200k off by {o200k_off}, heuristic by {heuristic_off}"
    );
}

use chatfold::testing::Oddity;

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(256))]

    /// Converting a generated OpenAI history to Anthropic's format and back
    /// gives the same messages, or an error naming what has no lossless
    /// form; never another history, never a panic.
    #[test]
    fn conversion_round_trips_or_names_what_it_cannot_carry(
        h in proptest::prop_oneof![
            chatfold::testing::histories(30),
            // What converts: no custom roles, null content or mid-history system messages.
            chatfold::testing::Histories::new()
                .max_turns(30)
                .without(Oddity::CustomRoles)
                .without(Oddity::NullContent)
                .without(Oddity::PinnedMidway)
                .strategy(),
        ]
    ) {
        match History::from(h.clone()).convert(Format::Anthropic) {
            Ok(claude) => {
                // What Anthropic gets reads back as Anthropic's, and converts back.
                let reread = History::from_json_value(claude.to_json()).unwrap().into_format(Format::Anthropic).unwrap();
                let back = reread.convert(Format::OpenAi).unwrap();
                // An absent content and `"content": null` convert alike.
                let plain = |mut messages: Vec<Message>| {
                    for m in &mut messages {
                        if m.content.is_none() {
                            m.extra_mut().remove("content");
                        }
                    }
                    messages
                };
                proptest::prop_assert_eq!(plain(back.messages), plain(h));
            }
            Err(Error::Conversion(e)) => proptest::prop_assert!(e.message() < h.len()),
            Err(other) => proptest::prop_assert!(false, "{other}"),
        }
    }
}

/// Every block type Anthropic documents for requests (documents of each
/// source, files, citations, server and MCP tools with their results, a
/// tool result with an image and `is_error`, container uploads, redacted
/// thinking) reads and writes back unchanged, with a string `system`.
#[test]
fn every_documented_block_type_round_trips() {
    let text = include_str!("fixtures/anthropic_blocks.json");
    let history = History::from_json_str(text).unwrap();
    assert_eq!(history.format(), Format::Anthropic);
    assert_eq!(history.to_json(), serde_json::from_str::<Value>(text).unwrap());
    assert_eq!(History::from_reader(text.as_bytes()).unwrap(), history);
    // The client tool call and its result are one unit; the server and MCP
    // tools pair inside the assistant turn.
    assert_eq!(history.messages[2].call_ids().collect::<Vec<_>>(), ["toolu_01"]);
    assert_eq!(
        history.messages[3].answered_ids().collect::<Vec<_>>(),
        ["toolu_01"]
    );
    // Compacting it changes nothing when it fits, and keeps the turns whole when it does not.
    let fits = Compactor::new(100_000)
        .compact(&history.messages, &Extractive::new())
        .unwrap();
    assert_eq!(history.to_json_with(&fits.messages), history.to_json());
    // Here no user turn can open the kept part within the budget (the last
    // user message holds a tool result): the summary as a leading user turn
    // keeps the request user-first.
    let policy = chatfold::FoldPolicy::new().summary_role("user");
    let folded = Compactor::new(120)
        .keep_recent(60)
        .policy(policy)
        .compact(&history.messages, &Extractive::new())
        .unwrap();
    assert_anthropic_accepts(&history.to_json_with(&folded.messages));
}

#[test]
fn a_model_name_hints_the_format_when_the_structure_does_not() {
    let claude = json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    let history = History::from_json_value(claude).unwrap();
    assert_eq!(
        (history.format(), history.format_known()),
        (Format::Anthropic, true)
    );
    // A proxy serving Claude in OpenAI's format: the hint gives way.
    assert_eq!(
        history.into_format(Format::OpenAi).unwrap().format(),
        Format::OpenAi
    );
    let unknown = History::from_json_value(json!({"model": "llama3", "messages": []})).unwrap();
    assert!(!unknown.format_known() && unknown.is_body());
    assert!(!History::from(Vec::new()).is_body());
}

/// Old, large `tool_result` blocks are cleared like tool messages: the
/// block stays, answering its call, with a placeholder naming the tool.
#[test]
fn old_tool_result_blocks_are_cleared_in_place() {
    let mut messages = Vec::new();
    for i in 0..4 {
        let mut t = turn(i);
        t[2]["content"][0]["content"] = json!(format!("log line {i} at /var/log/app{i}.log ").repeat(60));
        messages.extend(t);
    }
    let history = History::from_json_value(json!({"system": "s", "messages": messages})).unwrap();
    let clearing = chatfold::ClearToolResults::new().keep_recent(2).min_tokens(50);
    let (cleared, indices) = clearing.clear(&history.messages, &chatfold::Heuristic).unwrap();
    // The first three turns' results are older than the newest two blocks;
    // only the long first block of each is cleared.
    assert_eq!(indices, [3, 7, 11]);
    let block = &cleared[3].parts()[0];
    let text = block.as_json()["content"].as_str().unwrap();
    assert!(
        text.starts_with("[tool result cleared: search (call toolu_0a)"),
        "{text}"
    );
    assert!(text.contains("/var/log/app0.log"), "{text}");
    assert_eq!(
        cleared[3].answered_ids().collect::<Vec<_>>(),
        ["toolu_0a", "toolu_0b"]
    );
    assert_eq!(cleared[15], history.messages[15]);
    assert_anthropic_accepts(&history.to_json_with(&cleared));
}

/// The ledger reads identifiers from Anthropic's blocks too: a path that
/// only a folded `tool_use` input names is kept in the summary.
#[test]
fn the_ledger_keeps_identifiers_from_tool_use_inputs() {
    let mut messages = Vec::new();
    for i in 0..12 {
        let mut t = turn(i);
        t[1]["content"][1]["input"] = json!({"path": format!("/srv/exports/batch{i}.csv")});
        messages.extend(t);
    }
    let history = History::from_json_value(json!({"system": "s", "messages": messages})).unwrap();
    let vague = |_: &SummaryRequest<'_>| {
        Ok::<_, std::convert::Infallible>("Several exports were searched.".to_owned())
    };
    let result = Compactor::new(700)
        .fold_to(700)
        .keep_recent(150)
        .compact(&history.messages, &vague)
        .unwrap();
    let out = history.to_json_with(&result.messages);
    let summary = out["system"][1]["text"].as_str().unwrap();
    assert!(summary.contains("/srv/exports/batch0.csv"), "{summary}");
}

/// The extractive summarizer reads Anthropic's tool calls and results as
/// it reads OpenAI's: each call with its result is a line under `Tools:`.
#[test]
fn the_extractive_summary_names_tool_calls_and_results_in_blocks() {
    let mut messages = Vec::new();
    for i in 0..12 {
        messages.extend(turn(i));
    }
    let history = History::from_json_value(json!({"system": "s", "messages": messages})).unwrap();
    let result = Compactor::new(900)
        .keep_recent(100)
        .compact(&history.messages, &Extractive::new())
        .unwrap();
    let summary = history.to_json_with(&result.messages)["system"][1]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        summary.contains(r#"search({"q":"day 0 sights"}) → Palace 0, museum 0, market 0."#),
        "{summary}"
    );
    assert!(summary.contains("Palace 0, museum 0, market 0."), "{summary}");
}

/// A turn of an agent conversation in Anthropic's form: a user request,
/// then `loops` tool exchanges (an assistant `tool_use`, the user's
/// `tool_result`), then maybe an assistant answer.
fn agent_turn(i: usize, loops: usize, answer: bool, words: usize) -> Vec<Value> {
    let text = |what: &str| format!("{what} {i}: {}", "word ".repeat(words).trim_end());
    let mut out = vec![json!({"role": "user", "content": text("request")})];
    for k in 0..loops {
        let id = format!("toolu_{i}_{k}");
        out.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "run", "input": {"step": k}}
        ]}));
        out.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": text("output")}
        ]}));
    }
    if answer {
        out.push(json!({"role": "assistant", "content": text("answer")}));
    }
    out
}

/// The summary messages of a written request, in `system` and in `messages`.
fn summaries_in(body: &Value, policy: &chatfold::FoldPolicy) -> usize {
    let in_system = match &body["system"] {
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| {
                b["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(&*policy.summary_prefix))
            })
            .count(),
        Value::String(t) => usize::from(t.starts_with(&*policy.summary_prefix)),
        _ => 0,
    };
    let list = body.get("messages").unwrap_or(body);
    let in_messages = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            let m: Message = serde_json::from_value((*m).clone()).unwrap();
            policy.is_summary(&m)
        })
        .count();
    in_system + in_messages
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(128))]

    /// Every request the compactor writes for an Anthropic history (a body
    /// with `system`, or a bare array) is one Anthropic, Bedrock and Vertex
    /// accept: a user turn first, every `tool_result` answering the turn
    /// before it, every `tool_use` answered; one summary; within budget
    /// when reachable; and the next request, one turn longer, again.
    #[test]
    fn every_anthropic_request_written_is_valid(
        turns in proptest::collection::vec((0usize..6, proptest::bool::ANY, 1usize..30), 1..25),
        budget in 60usize..1500,
        keep in 0u32..=100,
        bare in proptest::bool::ANY,
    ) {
        let mut messages: Vec<Value> = Vec::new();
        for (i, &(loops, answer, words)) in turns.iter().enumerate() {
            messages.extend(agent_turn(i, loops, answer, words));
        }
        let mut body = match bare {
            true => Value::Array(messages),
            false => json!({"model": "claude-sonnet-4-5", "system": "You run tools.", "messages": messages}),
        };
        for round in 0..2 {
            let history = History::from_json_value(body.clone()).unwrap().into_format(Format::Anthropic).unwrap();
            let policy = chatfold::FoldPolicy::new().placement(history.placement());
            let compactor = Compactor::new(budget).keep_recent(budget * keep as usize / 100).policy(policy.clone());
            let result = compactor.compact(&history.messages, &Extractive::new()).unwrap();
            if !result.over_budget {
                proptest::prop_assert!(result.tokens_after <= budget);
            }
            let out = history.to_json_with(&result.messages);
            let list = out.get("messages").unwrap_or(&out).clone();
            assert_anthropic_accepts(&json!({"messages": list}));
            proptest::prop_assert!(summaries_in(&out, &policy) <= 1, "round {}: {}", round, out);
            // The client sends what it got back, one turn longer.
            body = out;
            let next = agent_turn(1000 + round, 1, true, 5);
            match body.get_mut("messages") {
                Some(list) => list.as_array_mut().unwrap().extend(next),
                None => body.as_array_mut().unwrap().extend(next),
            }
        }
    }
}

/// A memory over an Anthropic conversation whose last user turns all carry
/// tool results writes requests Anthropic accepts, with its summary leading
/// as a user turn once the buffer opens on a tool exchange.
#[test]
fn memories_place_their_summary_as_anthropic_needs_it() {
    use chatfold::memory::{Memory, Remember, RollingMemory, Settings, TieredMemory, TieredSettings};
    let body = json!({"system": "You run tools.", "messages": agent_turn(0, 12, false, 8)});
    let history = History::from_json_value(body).unwrap();
    let policy = chatfold::FoldPolicy::new().placement(history.placement());
    let mut rolling = RollingMemory::new(
        Settings::new(120)
            .summarizer(Extractive::new())
            .policy(policy.clone()),
    )
    .unwrap();
    let summarize = async |r: SummaryRequest<'_>| {
        Ok::<_, std::convert::Infallible>(format!("{} steps ran.", r.messages().len()))
    };
    let (tiered, _worker) =
        TieredMemory::new([], TieredSettings::new(60, 200).policy(policy.clone()), summarize).unwrap();
    for m in history.messages.iter().skip(1).cloned() {
        rolling.add_message(m.clone()).unwrap();
        tiered.add_message(m);
    }
    pollster::block_on(tiered.fold_now()).unwrap();
    for messages in [rolling.messages(), tiered.messages()] {
        assert!(messages.iter().any(|m| policy.is_summary(m)), "{messages:?}");
        let mut all = vec![history.messages[0].clone()];
        all.extend(messages);
        let out = history.to_json_with(&all);
        assert_anthropic_accepts(&out);
        assert_eq!(out["system"], "You run tools.");
        let first: Message = serde_json::from_value(out["messages"][0].clone()).unwrap();
        assert!(policy.is_summary(&first), "{out}");
    }
}
