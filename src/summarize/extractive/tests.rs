//! The extractive summarizer's behaviour, end to end, and the text helpers it reads with.

use super::keywords::{SHORT_FORMS, STOPWORDS, keywords, short_form, stem, telling};
use super::markers::{IMPERATIVES, decision, is_error};
use super::stamp::stamp;
use super::text::{clip, opening, sentences};
use super::words::COMMON;
use super::*;
use crate::ToolCall;
use crate::message::{Message, Role};

fn summarize(folded: &[Message], allowance: usize) -> String {
    Extractive::new()
        .summarize(&SummaryRequest::new(None, folded, allowance))
        .unwrap()
}

/// A line that says again what a better one says is written once; lines
/// that name different things, or say too little to compare, each get
/// theirs.
#[test]
fn lines_that_say_the_same_are_written_once() {
    let mut folded = vec![Message::user("Please watch the payments rollout this week.")];
    let names = [
        "cache", "queue", "alpha", "delta", "north", "search", "batch", "orders",
    ];
    for (i, name) in names.iter().enumerate() {
        folded.push(Message::user(format!(
            "Status of {name} please, and the next one after it."
        )));
        folded.push(Message::assistant(format!(
            "The {name} dashboard looks steady, latency within its usual band across the {} fleet.",
            names[(i + 1) % names.len()]
        )));
    }
    folded.push(Message::assistant(
        "The cache dashboard reads /srv/cache/a.log, latency steady within its usual band.",
    ));
    folded.push(Message::assistant(
        "The cache dashboard reads /srv/cache/b.log, latency steady within its usual band.",
    ));
    folded.push(Message::assistant("Ok."));
    folded.push(Message::assistant("Ok."));
    folded.push(Message::user("Thanks, that is all for today, see you tomorrow."));
    let summary = summarize(&folded, 2_000);
    let steady = summary
        .lines()
        .filter(|l| l.contains("dashboard looks steady"))
        .count();
    assert_eq!(steady, 1, "{summary}");
    // Each path is its own line; the short lines are not compared.
    assert!(
        summary.contains("/srv/cache/a.log") && summary.contains("/srv/cache/b.log"),
        "{summary}"
    );
    // With room for all, every other line is there.
    let statuses = summary
        .lines()
        .filter(|l| l.starts_with("user: Status of"))
        .count();
    assert_eq!(statuses, 1, "{summary}");
}

#[test]
fn word_lists_are_sorted_for_binary_search() {
    assert!(IMPERATIVES.windows(2).all(|w| w[0] < w[1]));
    assert!(COMMON.windows(2).all(|w| w[0] < w[1]));
    assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    assert!(SHORT_FORMS.windows(2).all(|w| w[0].0 < w[1].0));
    // Each as `stem` leaves it (else no word would find it), and its
    // short form long enough to be told.
    for &(long, short) in SHORT_FORMS {
        assert_eq!(stem(long), long);
        assert_eq!(stem(short), short);
        assert!(short.len() >= 4, "{short}");
        assert!(
            long.len() < 32 && long.as_bytes()[0].is_ascii_lowercase(),
            "{long}"
        );
        assert_eq!(short_form(long), short);
    }
}

#[test]
fn sentences_split_where_people_end_them() {
    fn split(t: &str) -> Vec<&str> {
        sentences(t).collect()
    }
    assert_eq!(split("One. Two."), ["One.", "Two."]);
    assert_eq!(split("v1.2 is out! Yes"), ["v1.2 is out!", "Yes"]);
    assert_eq!(split("line one\n\nline two"), ["line one", "line two"]);
    assert_eq!(split("你好。再见"), ["你好。", "再见"]);
    assert!(split("  \n ").is_empty());
}

#[test]
fn openings_take_sentences_until_long_enough() {
    assert_eq!(
        opening("Hi. I need help with a failing deploy of the ledger service, again. Thanks!"),
        "Hi. I need help with a failing deploy of the ledger service, again."
    );
    assert_eq!(opening("Short one."), "Short one.");
    assert_eq!(opening(""), "");
}

#[test]
fn decisions_and_requests_are_recognised() {
    assert!(decision("We decided to keep Postgres.", &Role::Assistant).is_some());
    assert!(decision("OK, let's ship it on Monday.", &Role::User).is_some());
    assert!(decision("Use the blue cluster.", &Role::Assistant).is_some());
    assert!(decision("Add a retry to the uploader.", &Role::User).is_some());
    assert!(decision("Add a retry to the uploader.", &Role::Assistant).is_none());
    assert!(decision("The logs are clean.", &Role::User).is_none());
    assert!(decision("It was undecided.", &Role::User).is_none());
}

#[test]
fn clips_end_at_words() {
    let long = "word ".repeat(100);
    let clipped = clip(&long, 42);
    assert_eq!(clipped, format!("{}…", "word ".repeat(8).trim_end()));
    assert_eq!(clip(&"x".repeat(300), 200).chars().count(), 201);
    assert_eq!(clip("short", 200), "short");
}

/// A turn that asks and decides gives both lines.
#[test]
fn sections_come_in_order_and_questions_answered_are_not_open() {
    let folded = [
        Message::user("Migrate the billing service to the new queue."),
        Message::assistant("Which queue, Kafka or SQS?"),
        Message::user("Which region hosts the queue?"),
        Message::assistant("The queue lives in the Frankfurt region."),
        Message::user("We decided on SQS. Is the Zanzibar export still nightly?"),
        Message::assistant_tool_calls(vec![ToolCall::new("c1", "logs", "{}")]),
        Message::tool("ERROR config: unknown field `ttl`", "c1"),
        Message::assistant("The config has an unknown field."),
    ];
    let summary = summarize(&folded, 1000);
    assert_eq!(
        summary,
        "Started with:\n\
         user: Migrate the billing service to the new queue.\n\
         Decided:\n\
         user: We decided on SQS.\n\
         Discussed:\n\
         assistant: Which queue, Kafka or SQS?\n\
         user: Which region hosts the queue?\n\
         assistant: The queue lives in the Frankfurt region.\n\
         Tools:\n\
         logs({}) failed: ERROR config: unknown field `ttl`\n\
         Open questions:\n\
         user: Is the Zanzibar export still nightly?\n\
         Recently:\n\
         assistant: The config has an unknown field."
    );
}

/// A question is answered when its reply (the first answer after it
/// that makes no tool call) takes up one of its words, in another form,
/// or one of its names; not when the reply only asks back or speaks of
/// something else.
#[test]
fn a_reply_that_takes_a_question_up_answers_it() {
    let open = |folded: &[Message]| -> Vec<String> {
        let summary = summarize(folded, 1000);
        (summary.lines())
            .skip_while(|l| *l != "Open questions:")
            .skip(1)
            .take_while(|l| l.starts_with("user: "))
            .map(str::to_owned)
            .collect()
    };
    // The question, a turn that makes a call (saying `before` too), its
    // result, the reply.
    let asked_with = |question: &str, before: &str, reply: &str| {
        let mut call = Message::assistant(before);
        call.tool_calls = vec![ToolCall::new("c1", "run", "{}")];
        vec![
            Message::user("Please fix the staging deploy of ledgerd."),
            Message::assistant("On it."),
            Message::user(question),
            call,
            Message::tool("done", "c1"),
            Message::assistant(reply),
            Message::user("Thanks, next topic: the weekly report."),
            Message::assistant("The weekly report is ready."),
        ]
    };
    let asked = |question: &str, reply: &str| asked_with(question, "", reply);
    let still_open = |q: &str| vec![format!("user: {q}")];
    // A name: `stg-app-07` (its words are too short to count).
    let q = "Is the database reachable from stg-app-07?";
    let reply = "db-02.internal:5432 accepts connections from stg-app-07.";
    assert!(open(&asked(q, reply)).is_empty());
    // A word in another form: `take` and `takes`.
    let q = "What format does the new field take?";
    assert!(open(&asked(q, "It takes a duration string such as 5s.")).is_empty());
    // A word and its short form: `prod` and `production`, `config` and
    // `configuration`; not a word and a longer one (`data`, `database`).
    let q = "So what happens in prod after the upgrade?";
    assert!(open(&asked(q, "In production the new release waits for the canary.")).is_empty());
    let q = "Did you read the configuration?";
    assert!(open(&asked(q, "Yes, the config looks right.")).is_empty());
    let q = "Is the data stale?";
    assert_eq!(open(&asked(q, "The database is fine.")), still_open(q));
    // (`stats` is `stat`, as `state` is: no short form of `statistics`.)
    let q = "What do the statistics show?";
    assert_eq!(open(&asked(q, "The state is unchanged.")), still_open(q));
    // A reply that only asks back, or speaks of something else, leaves
    // it open; one that offers more after its answer does not.
    let q = "Is the Zanzibar export still nightly?";
    assert_eq!(
        open(&asked(q, "Which Zanzibar export do you mean?")),
        still_open(q)
    );
    assert_eq!(open(&asked(q, "The config has an unknown field.")), still_open(q));
    assert!(open(&asked(q, "Yes, it runs nightly. Want me to move it?")).is_empty());
    // What a turn that makes a call says is no reply: the reply comes
    // after the call.
    let before = "Let me check the Zanzibar export.";
    assert_eq!(
        open(&asked_with(q, before, "The config has an unknown field.")),
        still_open(q)
    );
    assert!(open(&asked_with(q, "Let me look.", "Yes, it runs nightly.")).is_empty());
    // Words joined by a slash are no name.
    let q = "Should the Zanzibar job read and/or write?";
    assert_eq!(open(&asked(q, "That is and/or logic.")), still_open(q));
    // A later answer that is not its reply needs three in five words.
    let q = "Is the Zanzibar export still nightly?";
    let mut late = asked(q, "The config has an unknown field.");
    late.push(Message::assistant("The export is fine."));
    assert_eq!(open(&late), still_open(q));
    late.push(Message::assistant("Zanzibar still runs nightly."));
    assert!(open(&late).is_empty());
}

#[test]
fn words_lose_one_ending_and_names_stay_whole() {
    let stems = [
        ("takes", "take"),
        ("take", "take"),
        ("looking", "look"),
        ("looks", "look"),
        ("loaded", "load"),
        ("indexes", "index"),
        ("cache", "cach"),
        ("cached", "cach"),
        ("caches", "cach"),
        ("process", "process"),
        ("processes", "process"),
        ("status", "status"),
        ("statuses", "status"),
        ("uses", "uses"),
        ("being", "being"),
    ];
    for (word, stem_of) in stems {
        assert_eq!(stem(word), stem_of, "{word}");
    }
    let mut words = Vec::new();
    telling(
        "Is db-02.internal:5432 up (from stg-app-07), e.g. at /srv/app? Yes.",
        true,
        |w| {
            words.push(w.to_owned());
            std::ops::ControlFlow::Continue(())
        },
    );
    // A question's stop words are told before the stem (`users` is
    // no `user`).
    assert_eq!(keywords("How many users signed up?"), ["many", "user", "sign"]);
    // Names first; `from` is a stop word, `e.g` too short a name.
    assert_eq!(
        words,
        ["db-02.internal:5432", "stg-app-07", "srv/app", "internal", "5432"]
    );
}

/// An identifier that holds a marker's word reports no failure: a
/// configuration with `statement_timeout_ms` read back, `error_rate`,
/// `errors_total`; an error code of capitals does.
#[test]
fn words_inside_identifiers_are_no_markers() {
    assert!(!is_error("statement_timeout_ms = 5000\nconnect_timeout = \"3s\""));
    assert!(!is_error(
        r#"{"error_rate": 0.01, "timeout_ms": 500, "errors_total": 0}"#
    ));
    assert!(is_error("request timeout after 30s"));
    assert!(is_error("Error: permission denied"));
    assert!(is_error("3 errors found"));
    assert!(is_error("rpc failed: PERMISSION_DENIED"));
    assert!(is_error("net::ERR_CONNECTION_REFUSED"));
    assert!(!is_error("PERMISSION_GRANTED"));
    assert!(decision("We must_not change it.", &Role::Assistant).is_none());
    assert!(decision("OK, lets go with it.", &Role::Assistant).is_some());
}

/// A call failed when its result is flagged or opens with an error; a
/// result that reports one further on (a search's matches, a log) is
/// shown by that line, but the call ran.
#[test]
fn only_a_failed_call_is_said_to_have_failed() {
    let tools = |result: Message| -> String {
        let folded = [
            Message::user("Look into it."),
            Message::assistant_tool_calls(vec![ToolCall::new("c1", "search_logs", "{}")]),
            result,
            Message::assistant("Done."),
        ];
        let summary = summarize(&folded, 1000);
        let line = summary.lines().skip_while(|l| *l != "Tools:").nth(1);
        line.unwrap_or_default().to_owned()
    };
    let matches =
        "10:00:01 rollout started\n10:00:09 health check /healthz failed, attempt 1/5\n10:00:40 rollout done";
    assert_eq!(
        tools(Message::tool(matches, "c1")),
        "search_logs({}) → 10:00:09 health check /healthz failed, attempt 1/5"
    );
    assert_eq!(
        tools(Message::tool(
            "\n  \nError: index logs-2026 not found\nretry later",
            "c1"
        )),
        "search_logs({}) failed: Error: index logs-2026 not found"
    );
    let mut flagged = Message::tool("the query took too long", "c1");
    flagged
        .extra_mut()
        .insert("is_error".into(), serde_json::Value::Bool(true));
    assert_eq!(tools(flagged), "search_logs({}) failed: the query took too long");
    assert_eq!(
        tools(Message::tool("3 matches, all healthy.", "c1")),
        "search_logs({}) → 3 matches, all healthy."
    );
    // A result that reports an error outranks one that does not (one
    // line fits).
    let folded: Vec<Message> = (0..12)
        .flat_map(|i| {
            let id = format!("c{i}");
            let result = match i {
                5 => format!("run {i} ok\nrun {i}: connection refused by db-02"),
                _ => format!("run {i} ok, nothing to report in this part of the log"),
            };
            [
                Message::assistant_tool_calls(vec![ToolCall::new(&id, "search_logs", "{}")]),
                Message::tool(result, id),
            ]
        })
        .collect();
    let summary = summarize(&folded, 22);
    assert!(summary.contains("run 5: connection refused"), "{summary}");
}

#[test]
fn the_callers_counter_is_used_when_the_request_carries_one() {
    let folded: Vec<Message> = (0..40)
        .map(|i| Message::user(format!("Message number {i} says something long enough to count.")))
        .collect();
    let words = |t: &str| t.split_whitespace().count();
    let request = SummaryRequest::new(None, &folded, 30).with_counter(Some(&words));
    let summary = Extractive::new().summarize(&request).unwrap();
    assert!(words(&summary) <= 30, "{summary}");
    // Heuristic would allow fewer lines: the caller's counter decided.
    assert!(Heuristic.count(&summary) > 30, "{summary}");
    let own = Extractive::new()
        .summarize(&SummaryRequest::new(None, &folded, 30))
        .unwrap();
    assert!(Heuristic.count(&own) <= 30, "{own}");
    assert_ne!(own, summary);
}

#[test]
fn a_tight_allowance_samples_the_whole_span() {
    let folded: Vec<Message> = (0..300)
        .map(|i| Message::user(format!("We decided item {i} goes in.")))
        .collect();
    let one = |_: &str| 1;
    let request = SummaryRequest::new(None, &folded, 12);
    let summary = Extractive::with_counter(one).summarize(&request).unwrap();
    // One token per line: headings and nine lines.
    let items: Vec<usize> = summary
        .lines()
        .filter_map(|l| l.strip_prefix("user: We decided item "))
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect();
    assert!(items.iter().any(|&i| i < 100), "{summary}");
    assert!(items.iter().any(|&i| (100..200).contains(&i)), "{summary}");
    assert!(items.iter().any(|&i| i >= 200), "{summary}");
    assert!(summary.lines().count() <= 12);
}

/// Decisions that differ only in the names in backticks are one line
/// listing the names, and stay one as the summary rolls forward; a
/// decision that differs in another word, or in two names, keeps its
/// own line.
#[test]
fn decisions_that_differ_only_in_names_are_one_line() {
    let decide = |name: &str| Message::user(format!("Let's use `{name}` for the lowest free descriptor."));
    let mut folded = vec![Message::user("We need descriptors handled safely.")];
    folded.extend(["socket", "open", "openat", "open"].map(decide));
    folded.extend([
        Message::user("Let's use `dup` for the highest free descriptor."),
        Message::user("Let's use `a` and `b` for the lowest free descriptor."),
        Message::user("Let's use `c` and `d` for the lowest free descriptor."),
        Message::assistant("Noted, thanks."),
        Message::user("Bye."),
    ]);
    let summary = summarize(&folded, 2_000);
    let lowest: Vec<&str> = summary.lines().filter(|l| l.contains("lowest")).collect();
    assert!(
        lowest.contains(&"user: Let's use `socket` / `open` / `openat` for the lowest free descriptor."),
        "{summary}"
    );
    assert_eq!(lowest.len(), 3, "{summary}");
    assert!(summary.contains("`dup` for the highest"), "{summary}");
    // Rolled forward, a name more joins the line.
    let more = [
        decide("fcntl"),
        Message::user("That is all of them."),
        Message::assistant("Good."),
        Message::user("Bye again."),
    ];
    let request = SummaryRequest::new(Some(&summary), &more, 2_000);
    let again = Extractive::new().summarize(&request).unwrap();
    assert!(
        again.contains(
            "user: Let's use `socket` / `open` / `openat` / `fcntl` for the lowest free descriptor."
        ),
        "{again}"
    );
    assert_eq!(again.matches("for the lowest").count(), 3, "{again}");
}

/// Small talk takes no room, a decision's marker alone makes no
/// decision, and each line says when it was said: its session's date,
/// before it unless the line above in its section has the same.
#[test]
fn small_talk_goes_and_dates_stay_with_their_lines() {
    let folded = [
        Message::user("[1:56 pm on 8 May, 2023] Hey Mel! Good to see you! How have you been?"),
        Message::assistant("Hey Caroline! Agreed, so good to see you."),
        Message::user("I went to a LGBTQ support group yesterday. It was so powerful."),
        Message::assistant("Keep it up! I'll keep ya posted."),
        Message::user("My kids painted a sunset with a palm tree at the Riverside studio."),
        Message::assistant("[7:55 pm on 25 May, 2023] Thanks, Caroline!"),
        Message::user("I ran a charity race for mental health last Saturday."),
        Message::assistant("Awesome! Keep it up!"),
        Message::user("Thanks! Bye!"),
    ];
    let summary = summarize(&folded, 1000);
    assert_eq!(
        summary,
        "Started with:\n\
         [8 May, 2023] user: I went to a LGBTQ support group yesterday. It was so powerful.\n\
         Discussed:\n\
         [8 May, 2023] user: My kids painted a sunset with a palm tree at the Riverside studio.\n\
         [25 May, 2023] user: I ran a charity race for mental health last Saturday.\n\
         Recently:\n\
         [25 May, 2023] assistant: Awesome! Keep it up!\n\
         user: Thanks! Bye!"
    );
    // Rolled forward, the lines keep their dates; the new ones get theirs.
    let more = [
        Message::user("2023-06-09T10:00:00Z We adopted a puppy named Oscar on Tuesday."),
        Message::assistant("Cute!"),
        Message::user("Talk soon."),
    ];
    let again = Extractive::new()
        .summarize(&SummaryRequest::new(Some(&summary), &more, 1000))
        .unwrap();
    assert!(
        again.contains("[8 May, 2023] user: My kids painted a sunset")
            && again.contains("[25 May, 2023] user: I ran a charity race")
            && again.contains("[2023-06-09] user: We adopted a puppy named Oscar on Tuesday."),
        "{again}"
    );
    assert!(
        again.starts_with("Started with:\n[8 May, 2023] user: I went to"),
        "{again}"
    );
}

/// Over a long span, a decision's marker keeps its section only for a
/// line that tells as much as the best said, or names something exact.
#[test]
fn a_marker_alone_makes_no_decision() {
    let topics = [
        "Lisbon", "Kyoto", "Nairobi", "Oslo", "Quito", "Hanoi", "Perth", "Tunis", "Lima", "Riga", "Accra",
        "Bergen", "Cusco", "Dakar",
    ];
    let mut folded = vec![Message::user("We are planning the Atlas migration.")];
    for (i, city) in topics.iter().enumerate() {
        folded.push(Message::user(format!(
            "The {city} office moved its payroll ledger onto the Atlas cluster in week {i}."
        )));
        folded.push(Message::assistant("Let's keep going, that's great."));
        folded.push(Message::assistant("Let's celebrate together soon."));
    }
    folded.push(Message::user("Let's pin `atlas-cli` to 4.2 before Friday."));
    folded.push(Message::assistant("Noted."));
    folded.push(Message::user("Bye."));
    let summary = summarize(&folded, 2_000);
    let decided: Vec<&str> = (summary.lines())
        .skip_while(|l| *l != "Decided:")
        .skip(1)
        .take_while(|l| !l.ends_with(':'))
        .collect();
    assert_eq!(
        decided,
        ["user: Let's pin `atlas-cli` to 4.2 before Friday."],
        "{summary}"
    );
    // (With room, said once, among what was discussed.)
    assert_eq!(summary.matches("celebrate").count(), 1, "{summary}");
    assert!(summary.contains("Nairobi office moved"), "{summary}");
}

#[test]
fn time_stamps_are_found_in_any_usual_form() {
    fn anchor(t: &str) -> Option<(&str, &str)> {
        stamp(t).map(|(a, end)| (a, &t[end..]))
    }
    assert_eq!(
        anchor("[1:56 pm on 8 May, 2023] Hey Mel!"),
        Some(("8 May, 2023", "Hey Mel!"))
    );
    assert_eq!(anchor("[May 8th, 2023] Hi"), Some(("May 8th, 2023", "Hi")));
    assert_eq!(anchor("[08/05/2023 13:56] Hi"), Some(("08/05/2023", "Hi")));
    assert_eq!(anchor("2023-05-08T13:56:00Z hi"), Some(("2023-05-08", "hi")));
    assert_eq!(anchor("2023-05-08 13:56 - hi"), Some(("2023-05-08", "hi")));
    assert_eq!(anchor("[Mon, 8 May 2023 13:56] hi"), Some(("8 May 2023", "hi")));
    assert_eq!(anchor("[1:56 pm] Hey"), None);
    assert_eq!(anchor("[WIP] fix 2023-05-08"), None);
    assert_eq!(anchor("Met on 8 May, 2023."), None);
    assert_eq!(anchor("20230508 build"), None);
}

#[test]
fn previous_summaries_roll_forward() {
    let folded = [Message::user("new fact, told plainly")];
    // A summary written otherwise: its first line is the start.
    let request = SummaryRequest::new(Some("old fact A\nold fact B"), &folded, 1000);
    let summary = Extractive::new().summarize(&request).unwrap();
    assert_eq!(
        summary,
        "Started with:\nold fact A\nuser: new fact, told plainly\nDiscussed:\nold fact B"
    );
    // One of ours: its start stays the start.
    let request = SummaryRequest::new(Some(&summary), &folded, 1000);
    let again = Extractive::new().summarize(&request).unwrap();
    assert!(again.starts_with("Started with:\nold fact A\n"), "{again}");
    assert_eq!(again.matches("new fact").count(), 1, "{again}");
}

#[test]
fn long_lines_are_clipped_and_empty_turns_skipped() {
    let folded = [Message::user("x".repeat(1000)), Message::assistant("   ")];
    let summary = summarize(&folded, 10_000);
    assert_eq!(
        summary.chars().count(),
        "Started with:\nuser: ".len() + LINE_CHARS + 1
    );
    assert!(summary.ends_with('…'));
}

#[test]
fn turns_without_text_still_give_a_summary() {
    let folded = [Message::assistant(""), Message::user("  ")];
    assert_eq!(summarize(&folded, 100), "2 earlier messages without text.");
    assert_eq!(summarize(&folded, 3), "2 earlier");
}

#[test]
fn tiny_allowances_keep_whole_words() {
    let folded = [Message::user("a long enough sentence here")];
    assert_eq!(summarize(&folded, 0), "a");
    assert_eq!(summarize(&folded, 3), "a long");
    assert_eq!(summarize(&folded, 7), "a long enough sentence here");
}
