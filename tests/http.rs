//! The HTTP summarizers against a fake endpoint on loopback: request shapes,
//! retries, time-outs, errors, async, and what a failure leaves unchanged.
#![cfg(all(feature = "openai", feature = "anthropic"))]

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use chatfold::memory::{Memory, Remember, RollingMemory, Settings};
use chatfold::summarize::{AnthropicSummarizer, HttpError, HttpErrorKind, OpenAiSummarizer, Prompt};
use chatfold::{Compactor, Error, Message, Summarizer, SummaryRequest, TokenCounter};
use common::fake_llm::{FakeLlm, Reply};
use serde_json::json;

const KEY: &str = "sk-test-4f9a1c7e2b8d0356";

fn request(folded: &[Message]) -> SummaryRequest<'_> {
    SummaryRequest::new(Some("The user is moving house."), folded, 120)
}

fn folded() -> Vec<Message> {
    vec![
        Message::user("Book the van for 12 May, ticket MOV-4471."),
        Message::assistant("Booked: confirmation VAN-88."),
    ]
}

/// Fast retries, so that the tests wait for Retry-After, not for backoff.
fn openai(server: &FakeLlm) -> OpenAiSummarizer {
    OpenAiSummarizer::new(server.url(), "gpt-test")
        .api_key(KEY)
        .backoff(Duration::from_millis(10), Duration::from_millis(40))
}

fn anthropic(server: &FakeLlm) -> AnthropicSummarizer {
    AnthropicSummarizer::new(server.url(), "claude-test")
        .api_key(KEY)
        .backoff(Duration::from_millis(10), Duration::from_millis(40))
}

fn fail<S: Summarizer<Error = HttpError>>(summarizer: &S) -> HttpError {
    let folded = folded();
    let error = summarizer.summarize(&request(&folded)).unwrap_err();
    assert!(!error.to_string().contains(KEY), "{error}");
    assert!(!format!("{error:?}").contains(KEY), "{error:?}");
    error
}

#[test]
fn openai_requests_carry_the_model_the_key_the_prompt_and_the_allowance() {
    let server = FakeLlm::start(vec![Reply::openai("  The van is booked (VAN-88).  ")]);
    let summarizer = openai(&server)
        .header("OpenAI-Organization", "org-7")
        .temperature(0.25);
    let folded = folded();
    let summary = summarizer.summarize(&request(&folded)).unwrap();
    assert_eq!(summary, "The van is booked (VAN-88).");
    let [sent] = &server.received()[..] else {
        panic!("{:?}", server.received())
    };
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(sent.header("openai-organization"), Some("org-7"));
    assert_eq!(sent.body["model"], "gpt-test");
    assert_eq!(sent.body["max_tokens"], 120);
    assert!((sent.body["temperature"].as_f64().unwrap() - 0.25).abs() < 1e-6);
    let messages = sent.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "system");
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("at most 120 tokens")
    );
    assert_eq!(messages[1]["role"], "user");
    let user = messages[1]["content"].as_str().unwrap();
    assert!(user.contains("The user is moving house."), "{user}");
    assert!(
        user.contains("user: Book the van for 12 May, ticket MOV-4471.\nassistant: Booked"),
        "{user}"
    );
}

#[test]
fn a_timeout_too_long_for_the_clock_is_a_long_one() {
    let server = FakeLlm::start(vec![Reply::openai("Booked.")]);
    let summarizer = openai(&server).timeout(Duration::MAX);
    let folded = folded();
    assert_eq!(summarizer.summarize(&request(&folded)).unwrap(), "Booked.");
}

#[test]
fn anthropic_requests_follow_the_messages_api() {
    let server = FakeLlm::start(vec![Reply::anthropic("Van booked.")]);
    let folded = folded();
    let summary = anthropic(&server).summarize(&request(&folded)).unwrap();
    assert_eq!(summary, "Van booked.");
    let sent = &server.received()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.body["model"], "claude-test");
    assert_eq!(sent.body["max_tokens"], 120);
    assert!(sent.body["system"].as_str().unwrap().contains("about 90 words"));
    assert_eq!(sent.body["messages"][0]["role"], "user");
    assert!(sent.body.get("temperature").is_none());
}

#[test]
fn anthropic_base_urls_with_or_without_the_version_reach_v1_messages() {
    for suffix in ["", "/", "/v1", "/v1/", "/v1/messages"] {
        let server = FakeLlm::start(vec![Reply::anthropic("ok")]);
        let base = server.url().strip_suffix("/v1").unwrap().to_owned() + suffix;
        let summarizer = AnthropicSummarizer::new(&base, "claude-test").api_key(KEY);
        let folded = folded();
        summarizer.summarize(&request(&folded)).unwrap();
        assert_eq!(server.received()[0].path, "/v1/messages", "{base}");
    }
}

#[test]
fn local_servers_need_no_key_and_a_full_endpoint_url_is_kept() {
    let server = FakeLlm::start(vec![Reply::openai("ok")]);
    let url = format!("{}/chat/completions", server.url());
    let summarizer = OpenAiSummarizer::new(url, "llama3.2").token_limit_field("max_completion_tokens");
    let folded = folded();
    summarizer.summarize(&request(&folded)).unwrap();
    let sent = &server.received()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.body["max_completion_tokens"], 120);
    assert!(sent.body.get("max_tokens").is_none());
}

#[test]
fn a_replaced_prompt_is_what_the_model_sees() {
    let server = FakeLlm::start(vec![Reply::openai("ok")]);
    let prompt = Prompt::new("Be terse: {words} words.", "{transcript}").unwrap();
    let folded = folded();
    openai(&server)
        .prompt(prompt)
        .summarize(&request(&folded))
        .unwrap();
    let body = &server.received()[0].body;
    assert_eq!(body["messages"][0]["content"], "Be terse: 90 words.");
    assert_eq!(
        body["messages"][1]["content"],
        "user: Book the van for 12 May, ticket MOV-4471.\nassistant: Booked: confirmation VAN-88.\n"
    );
}

#[test]
fn rate_limits_are_retried_after_the_servers_wait() {
    let limited = Reply::Answer(
        429,
        vec![("retry-after", "1".to_owned())],
        json!({"error": {"message": "Rate limit reached"}}).to_string(),
    );
    let server = FakeLlm::start(vec![limited, Reply::openai("done")]);
    let folded = folded();
    let start = Instant::now();
    let summary = openai(&server).summarize(&request(&folded)).unwrap();
    assert_eq!(summary, "done");
    assert!(start.elapsed() >= Duration::from_secs(1), "{:?}", start.elapsed());
    assert_eq!(server.received().len(), 2);
}

#[test]
fn a_retry_after_beyond_the_limit_fails_at_once() {
    let limited = Reply::Answer(429, vec![("retry-after", "3600".to_owned())], "{}".to_owned());
    let server = FakeLlm::start(vec![limited]);
    let error = fail(&openai(&server));
    assert_eq!(error.status(), Some(429));
    assert!(error.to_string().contains("asked to wait 3600 s"), "{error}");
    assert_eq!(server.received().len(), 1);
}

#[test]
fn server_errors_are_retried_until_the_retries_run_out() {
    let server = FakeLlm::start(vec![Reply::status(
        500,
        json!({"error": {"message": "upstream exploded"}}),
    )]);
    let error = fail(&openai(&server).retries(2));
    assert_eq!(error.kind(), HttpErrorKind::Status);
    assert_eq!(error.status(), Some(500));
    assert_eq!(error.attempt_count(), 3);
    assert_eq!(server.received().len(), 3);
    let text = error.to_string();
    assert!(
        text.contains("HTTP 500") && text.contains("upstream exploded"),
        "{text}"
    );
    assert!(text.contains("after 3 attempts"), "{text}");

    // Anthropic's overload (529) too, then success.
    let overloaded = Reply::status(
        529,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let server = FakeLlm::start(vec![overloaded, Reply::anthropic("fine")]);
    let folded = folded();
    assert_eq!(anthropic(&server).summarize(&request(&folded)).unwrap(), "fine");
}

#[test]
fn client_errors_fail_at_once_with_the_providers_message_and_never_the_key() {
    // The server echoes the key; the error must not.
    let message = format!("Incorrect API key provided: {KEY}.");
    let server = FakeLlm::start(vec![Reply::status(401, json!({"error": {"message": message}}))]);
    let error = fail(&openai(&server));
    assert_eq!(error.status(), Some(401));
    assert!(!error.is_transient());
    assert!(
        error.to_string().contains("HTTP 401: Incorrect API key provided"),
        "{error}"
    );
    assert_eq!(server.received().len(), 1);

    let server = FakeLlm::start(vec![Reply::status(
        400,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}),
    )]);
    let error = fail(&anthropic(&server));
    assert_eq!(error.to_string(), "anthropic: HTTP 400: max_tokens: too large");
    assert_eq!(server.received().len(), 1);
}

#[test]
fn answers_without_a_summary_are_errors() {
    let cases = [
        (
            Reply::Answer(200, vec![], "{not json".to_owned()),
            HttpErrorKind::InvalidAnswer,
        ),
        (Reply::json(json!({"choices": []})), HttpErrorKind::NoText),
        (Reply::openai("   "), HttpErrorKind::NoText),
        (
            Reply::json(json!({"choices": [{"message": {"role": "assistant", "content": null}}]})),
            HttpErrorKind::NoText,
        ),
        (
            Reply::json(
                json!({"choices": [{"message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}}]}),
            ),
            HttpErrorKind::Refusal,
        ),
        (
            Reply::json(
                json!({"choices": [{"message": {"role": "assistant", "content": ""}, "finish_reason": "content_filter"}]}),
            ),
            HttpErrorKind::Refusal,
        ),
        (
            Reply::json(json!({"object": "list"})),
            HttpErrorKind::InvalidAnswer,
        ),
    ];
    for (reply, kind) in cases {
        let server = FakeLlm::start(vec![reply.clone()]);
        let error = fail(&openai(&server));
        assert_eq!(error.kind(), kind, "{reply:?}: {error}");
        assert_eq!(server.received().len(), 1, "{reply:?} is not retried");
    }
    let anthropic_cases = [
        (
            Reply::json(json!({"content": [], "stop_reason": "refusal"})),
            HttpErrorKind::Refusal,
        ),
        (
            Reply::json(
                json!({"content": [{"type": "thinking", "thinking": "..."}], "stop_reason": "end_turn"}),
            ),
            HttpErrorKind::NoText,
        ),
    ];
    for (reply, kind) in anthropic_cases {
        let server = FakeLlm::start(vec![reply.clone()]);
        assert_eq!(fail(&anthropic(&server)).kind(), kind, "{reply:?}");
    }
}

#[test]
fn slow_answers_time_out_and_cut_connections_are_retried() {
    let slow = Reply::Late(Duration::from_secs(3), Box::new(Reply::openai("too late")));
    let server = FakeLlm::start(vec![slow]);
    let start = Instant::now();
    let error = fail(&openai(&server).timeout(Duration::from_millis(300)).retries(1));
    assert_eq!(error.kind(), HttpErrorKind::Timeout, "{error}");
    assert_eq!(error.attempt_count(), 2);
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());

    let server = FakeLlm::start(vec![Reply::CutOff, Reply::openai("second try")]);
    let folded = folded();
    assert_eq!(
        openai(&server).summarize(&request(&folded)).unwrap(),
        "second try"
    );
    assert_eq!(server.received().len(), 2);

    let server = FakeLlm::start(vec![Reply::CutOff]);
    let error = fail(&openai(&server).retries(0));
    assert_eq!(error.kind(), HttpErrorKind::Connection, "{error}");

    // Nothing listens here any more.
    let port = FakeLlm::start(vec![Reply::CutOff]).url();
    let error = fail(&OpenAiSummarizer::new(port, "m").retries(0));
    assert_eq!(error.kind(), HttpErrorKind::Connection, "{error}");
}

#[tokio::test(flavor = "current_thread")]
async fn async_calls_do_the_same_without_blocking_the_runtime() {
    let limited = Reply::Answer(429, vec![("retry-after", "0.2".to_owned())], "{}".to_owned());
    let server = FakeLlm::start(vec![limited, Reply::anthropic("async summary")]);
    let summarizer = anthropic(&server);
    let folded = folded();
    // A timer on the same single-threaded runtime keeps ticking meanwhile.
    let ticks = async {
        let mut n = 0;
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            n += 1;
        }
        n
    };
    let (summary, ticks) = tokio::join!(
        chatfold::AsyncSummarizer::summarize(&summarizer, request(&folded).into_owned()),
        ticks
    );
    assert_eq!(summary.unwrap(), "async summary");
    assert_eq!(ticks, 5);
    assert_eq!(server.received().len(), 2);

    let server = FakeLlm::start(vec![Reply::status(
        403,
        json!({"error": {"message": "forbidden"}}),
    )]);
    let error = chatfold::AsyncSummarizer::summarize(&openai(&server), request(&folded).into_owned())
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(403));
}

#[tokio::test(flavor = "current_thread")]
async fn dropping_the_future_stops_the_retries() {
    let server = FakeLlm::start(vec![Reply::status(503, json!({}))]);
    let summarizer = openai(&server)
        .backoff(Duration::from_millis(300), Duration::from_millis(300))
        .retries(10);
    let folded = folded();
    let call = chatfold::AsyncSummarizer::summarize(&summarizer, request(&folded).into_owned());
    assert!(
        tokio::time::timeout(Duration::from_millis(150), call)
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(server.received().len(), 1, "no retry after the caller left");
}

#[test]
fn a_failing_endpoint_leaves_history_and_memory_unchanged() {
    let history: Vec<Message> = (0..40)
        .map(|i| {
            if i % 2 == 0 {
                Message::user(format!("question {i} about invoice INV-{i:04}"))
            } else {
                Message::assistant(format!("answer {i}, with some detail to make it longer"))
            }
        })
        .collect();
    let before = history.clone();
    let server = FakeLlm::start(vec![Reply::status(401, json!({"error": {"message": "bad key"}}))]);
    let summarizer = openai(&server);
    let compactor = Compactor::new(150);
    match compactor.compact(&history, &summarizer) {
        Err(Error::Summarize(source)) => {
            let http = source
                .downcast_ref::<HttpError>()
                .expect("the HTTP error is the source");
            assert_eq!(http.status(), Some(401));
        }
        other => panic!("{other:?}"),
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = runtime.block_on(compactor.compact_async(&history, &summarizer));
    assert!(matches!(result, Err(Error::Summarize(_))), "{result:?}");
    assert_eq!(history, before);

    let mut memory = RollingMemory::new(Settings::new(60).summarizer(summarizer)).unwrap();
    let mut failed = false;
    for m in &history {
        let mut state = memory.to_state();
        if memory.add_message(m.clone()).is_err() {
            // The message is kept, nothing is evicted, the summary is as it was.
            state.buffer.push(m.clone());
            assert_eq!(memory.to_state(), state);
            failed = true;
            break;
        }
    }
    assert!(failed, "the memory had to summarize");

    // And when the endpoint works, its summary is what the compactor folds in.
    let server = FakeLlm::start(vec![Reply::openai(
        "Invoices INV-0000 to INV-0030 were discussed.",
    )]);
    let result = compactor.compact(&history, &openai(&server)).unwrap();
    assert!(result.summarized);
    let summary = result
        .messages
        .iter()
        .find(|m| compactor.policy.is_summary(m))
        .unwrap();
    assert!(
        summary
            .text()
            .contains("Invoices INV-0000 to INV-0030 were discussed."),
        "{}",
        summary.text()
    );
    assert!(compactor.counter.count_messages(&result.messages) <= 150);
    let sent = &server.received()[0];
    assert!(
        sent.body["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("question 0 about invoice INV-0000")
    );
}

/// Every log line, from every crate, at every level.
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        self.0.lock().unwrap().push(format!(
            "{} {}: {}",
            record.level(),
            record.target(),
            record.args()
        ));
    }
    fn flush(&self) {}
}

static LOGS: Capture = Capture(Mutex::new(Vec::new()));

#[test]
fn retries_are_logged_without_the_key() {
    log::set_logger(&LOGS).unwrap();
    log::set_max_level(log::LevelFilter::Trace);
    let message = format!("slow down, {KEY}");
    let server = FakeLlm::start(vec![
        Reply::status(429, json!({"error": {"message": message}})),
        Reply::openai("ok"),
    ]);
    let folded = folded();
    openai(&server).summarize(&request(&folded)).unwrap();
    let logs = LOGS.0.lock().unwrap();
    assert!(
        logs.iter()
            .any(|l| l.starts_with("WARN") && l.contains("HTTP 429") && l.contains("retry 1 of 3")),
        "{logs:#?}"
    );
    for line in logs.iter() {
        assert!(!line.contains(KEY), "{line}");
    }
}

#[test]
fn debug_output_hides_the_key() {
    let summarizer = OpenAiSummarizer::new("http://localhost:11434/v1", "m").api_key(KEY);
    let debug = format!("{summarizer:?}");
    assert!(!debug.contains(KEY), "{debug}");
    assert!(debug.contains("<redacted>"), "{debug}");
    assert_eq!(summarizer.url(), "http://localhost:11434/v1/chat/completions");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tiered_memory_folds_through_an_endpoint_and_survives_its_failures() {
    use chatfold::memory::{TieredMemory, TieredSettings};
    fn add_all<S>(memory: &TieredMemory<S>) {
        for i in 0..30 {
            memory.add_message(Message::user(format!(
                "step {i}: deploy build B-{i:03} to staging"
            )));
        }
    }
    let down = FakeLlm::start(vec![Reply::status(
        500,
        json!({"error": {"message": format!("down ({KEY})")}}),
    )]);
    let (memory, _worker) =
        TieredMemory::new([], TieredSettings::new(60, 400), openai(&down).retries(0)).unwrap();
    add_all(&memory);
    let error = memory.fold_now().await.unwrap_err();
    assert!(matches!(error, Error::Summarize(_)), "{error}");
    let stats = memory.stats();
    assert!(stats.folds_failed >= 1);
    let last = stats.last_error.unwrap();
    assert!(last.contains("HTTP 500") && !last.contains(KEY), "{last}");
    assert_eq!(memory.buffer().len(), 30, "nothing folded, nothing lost");
    assert_eq!(memory.summary(), "");

    let up = FakeLlm::start(vec![Reply::anthropic("Builds B-000 onwards went to staging.")]);
    let (memory, _worker) = TieredMemory::new([], TieredSettings::new(60, 400), anthropic(&up)).unwrap();
    add_all(&memory);
    memory.fold_now().await.unwrap();
    assert!(
        memory.summary().contains("Builds B-000 onwards went to staging."),
        "{}",
        memory.summary()
    );
    assert!(memory.buffer().len() < 30);
    assert!(!up.received().is_empty());
}

#[test]
fn retry_after_is_read_as_seconds_milliseconds_or_a_date() {
    let date = |offset: u64| {
        // An IMF-fixdate `offset` seconds from now, rounded up to the next second.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + offset
            + 1;
        let (days, secs) = (now / 86_400, now % 86_400);
        // Civil date from days since 1970-01-01 (Howard Hinnant's civil_from_days).
        let z = days as i64 + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        let names = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        // 1970-01-01 was a Thursday; a date with another weekday is no date.
        let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
        format!(
            "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
            weekdays[(days % 7) as usize],
            names[month as usize - 1],
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    };
    for (header, value, at_least) in [
        ("retry-after", date(1), Duration::from_millis(900)),
        ("retry-after-ms", "700".to_owned(), Duration::from_millis(700)),
        ("retry-after", "0.5".to_owned(), Duration::from_millis(500)),
    ] {
        let limited = Reply::Answer(503, vec![(header, value.clone())], "{}".to_owned());
        let server = FakeLlm::start(vec![limited, Reply::openai("ok")]);
        let folded = folded();
        let start = Instant::now();
        assert_eq!(openai(&server).summarize(&request(&folded)).unwrap(), "ok");
        assert!(
            start.elapsed() >= at_least,
            "{header}: {value}: {:?}",
            start.elapsed()
        );
        assert_eq!(server.received().len(), 2);
    }
    // Nonsense is ignored: the backoff applies.
    for junk in ["soon", "-5", "Mon, 01 Jan 99999999999 00:00:00 GMT", "NaN"] {
        let limited = Reply::Answer(429, vec![("retry-after", junk.to_owned())], "{}".to_owned());
        let server = FakeLlm::start(vec![limited, Reply::openai("ok")]);
        let folded = folded();
        assert_eq!(
            openai(&server).summarize(&request(&folded)).unwrap(),
            "ok",
            "{junk}"
        );
    }
}

#[test]
fn which_statuses_are_retried() {
    for (status, retried) in [
        (408, true),
        (429, true),
        (502, true),
        (400, false),
        (404, false),
        (409, false),
        (422, false),
    ] {
        let server = FakeLlm::start(vec![
            Reply::status(status, json!({"error": {"message": "x"}})),
            Reply::openai("ok"),
        ]);
        let folded = folded();
        let result = openai(&server).summarize(&request(&folded));
        assert_eq!(result.is_ok(), retried, "{status}: {result:?}");
        assert_eq!(server.received().len(), if retried { 2 } else { 1 }, "{status}");
    }
}

#[test]
fn redirects_are_not_followed() {
    let elsewhere = FakeLlm::start(vec![Reply::anthropic("should not be reached")]);
    let moved = Reply::Answer(
        307,
        vec![("location", format!("{}/messages", elsewhere.url()))],
        "{}".to_owned(),
    );
    let server = FakeLlm::start(vec![moved]);
    let error = fail(&anthropic(&server));
    assert_eq!(error.status(), Some(307));
    assert!(elsewhere.received().is_empty(), "the key went to another host");
}

#[test]
fn the_time_out_covers_a_body_that_stalls() {
    let server = FakeLlm::start(vec![Reply::Stall(Duration::from_secs(3))]);
    let start = Instant::now();
    let error = fail(&openai(&server).timeout(Duration::from_millis(300)).retries(0));
    assert_eq!(error.kind(), HttpErrorKind::Timeout, "{error}");
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
}

#[test]
fn an_async_call_never_polled_sends_nothing() {
    let server = FakeLlm::start(vec![Reply::openai("unused")]);
    let summarizer = openai(&server);
    let folded = folded();
    drop(chatfold::AsyncSummarizer::summarize(
        &summarizer,
        request(&folded).into_owned(),
    ));
    std::thread::sleep(Duration::from_millis(200));
    assert!(server.received().is_empty());
}

#[test]
fn credentials_in_the_url_stay_out_of_errors_and_debug() {
    let server = FakeLlm::start(vec![Reply::status(418, json!({"error": {"message": "teapot"}}))]);
    let url = server.url().replace("http://", "http://user:pw-secret@") + "?key=q-secret";
    let summarizer = OpenAiSummarizer::new(url, "m").retries(0);
    let folded = folded();
    let error = summarizer.summarize(&request(&folded)).unwrap_err();
    assert_eq!(error.status(), Some(418));
    assert_eq!(server.received()[0].path, "/v1/chat/completions?key=q-secret");
    for text in [error.to_string(), format!("{summarizer:?}")] {
        assert!(
            !text.contains("pw-secret") && !text.contains("q-secret"),
            "{text}"
        );
    }
}
