//! The proxy's folds: a failing summarizer's fallback, fold threads, one
//! summarizer call for identical requests, per tenant, and shared through Redis.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::proxy::{self, Proxy, post};
use crate::redis_server;
use crate::upstream::{Reply, Seen, Upstream};
use crate::{check_openai, ok_upstream, openai_body};

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_summarizer_still_serves_with_the_extractive_fallback() {
    let up = ok_upstream().await;
    let proxy = Proxy::start(&[
        "--upstream",
        &up.url(),
        "--budget",
        "400",
        "--summarize-url",
        "http://127.0.0.1:9/v1",
        "--summarize-model",
        "m",
        "--summarize-retries",
        "0",
    ]);
    let answer = post(
        &proxy.url("/v1/chat/completions"),
        &[],
        openai_body(30).to_string(),
    )
    .await;
    assert_eq!(answer.status, 200);
    assert!(
        answer
            .header("x-chatfold-fallback")
            .unwrap()
            .starts_with("extractive")
    );
    check_openai(&up.seen()[0].json());
    let text = crate::proxy::metrics(&proxy).await;
    assert!(text.contains("chatfold_summarizer_failures_total 1"), "{text}");
    assert!(text.contains("chatfold_fallbacks_total 1"), "{text}");
}

/// `n` identical chat requests of one tenant, all at once; their answers.
async fn at_once(proxy: &Proxy, n: usize, body: &str) -> Vec<proxy::Answer> {
    let requests: Vec<_> = (0..n)
        .map(|_| {
            let (url, body) = (proxy.url("/v1/chat/completions"), body.to_owned());
            tokio::spawn(async move { post(&url, &[("authorization", "Bearer sk-a")], body).await })
        })
        .collect();
    let mut answers = Vec::with_capacity(n);
    for request in requests {
        answers.push(request.await.unwrap());
    }
    answers
}

/// A `--summarize-cmd` that takes `secs` and counts its calls in a file of
/// its own, removed when this is dropped.
struct Counting {
    file: std::path::PathBuf,
    command: String,
}

impl Counting {
    fn new(name: &str, secs: u32) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let file = std::env::temp_dir().join(format!("chatfold-serve-{}-{name}-{n}", std::process::id()));
        let command = format!(
            "cat > /dev/null; sleep {secs}; echo call >> '{}'; echo 'The user checked the logs of many hosts.'",
            file.display()
        );
        Counting { file, command }
    }

    /// The proxy's arguments: `up`, a budget of 400, this summarizer, `more`.
    fn args<'a>(&'a self, up: &'a str, more: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            "--upstream",
            up,
            "--budget",
            "400",
            "--summarize-cmd",
            &self.command,
        ];
        args.extend_from_slice(more);
        args
    }

    fn calls(&self) -> usize {
        std::fs::read_to_string(&self.file).map_or(0, |t| t.lines().count())
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fold_threads_bound_the_folds_at_once() {
    let up = ok_upstream().await;
    let log = std::env::temp_dir().join(format!("chatfold-serve-{}-turns", std::process::id()));
    let _ = std::fs::remove_file(&log);
    // Each call notes when it starts and ends, and takes a while between.
    let noting = format!(
        "echo start >> '{0}'; cat > /dev/null; sleep 0.5; echo end >> '{0}'; echo 'The user checked the logs.'",
        log.display()
    );
    let proxy = Proxy::start(&[
        "--upstream",
        &up.url(),
        "--budget",
        "400",
        "--summarize-cmd",
        &noting,
        "--fold-threads",
        "1",
        "--quiet",
    ]);
    // Two conversations, sent at once: each needs a fold of its own.
    let requests: Vec<_> = ["prod-eu", "prod-us"]
        .into_iter()
        .map(|cluster| {
            let url = proxy.url("/v1/chat/completions");
            let body = openai_body(30).to_string().replace("prod-eu", cluster);
            tokio::spawn(async move { post(&url, &[], body).await })
        })
        .collect();
    for request in requests {
        let answer = request.await.unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("x-chatfold-fallback"), None);
    }
    // One fold at a time: the second call starts after the first ends.
    let turns = std::fs::read_to_string(&log).unwrap();
    assert_eq!(turns, "start\nend\nstart\nend\n");
    let _ = std::fs::remove_file(&log);
    // None is no number of threads.
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_chatfold"))
        .args(["serve", "--upstream", &up.url(), "--fold-threads", "0"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--fold-threads"));
}

#[tokio::test(flavor = "multi_thread")]
async fn two_tenants_with_the_same_transcript_never_share_a_summary() {
    let (up, counting) = (ok_upstream().await, Counting::new("tenants", 0));
    let url = up.url();
    let proxy = Proxy::start(&counting.args(&url, &[]));
    let body = openai_body(30).to_string();
    let ask = |key: &'static str| {
        let (url, body) = (proxy.url("/v1/chat/completions"), body.clone());
        async move { post(&url, &[("authorization", key)], body).await }
    };
    assert_eq!(ask("Bearer sk-a").await.header("x-chatfold-cache"), Some("miss"));
    assert_eq!(ask("Bearer sk-a").await.header("x-chatfold-cache"), Some("hit"));
    assert_eq!(counting.calls(), 1);
    assert_eq!(ask("Bearer sk-b").await.header("x-chatfold-cache"), Some("miss"));
    assert_eq!(counting.calls(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_identical_requests_make_one_summarizer_call() {
    let (up, counting) = (ok_upstream().await, Counting::new("flight", 1));
    let url = up.url();
    let proxy = Proxy::start(&counting.args(&url, &["--quiet"]));
    for answer in at_once(&proxy, 32, &openai_body(30).to_string()).await {
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("x-chatfold-summarized"), Some("true"));
    }
    assert_eq!(counting.calls(), 1);
    let bodies: Vec<_> = up.seen().into_iter().map(|s: Seen| s.body).collect();
    assert_eq!(bodies.len(), 32);
    assert!(bodies.iter().all(|b| *b == bodies[0]));
}

#[tokio::test(flavor = "multi_thread")]
async fn two_proxies_share_a_fold_through_redis_and_keep_serving_when_it_dies() {
    let Some(mut redis) = redis_server::Server::start() else {
        return;
    };
    let (up, counting) = (ok_upstream().await, Counting::new("fleet", 1));
    let (url, redis_url) = (up.url(), redis.url());
    let more = [
        "--cache-redis",
        &redis_url,
        "--cache-secret",
        "the fleet's secret",
        "--quiet",
    ];
    let args = counting.args(&url, &more);
    let (a, b) = (Proxy::start(&args), Proxy::start(&args));
    let body = openai_body(30).to_string();
    let ask = |proxy: &Proxy, body: &str| {
        let (url, body) = (proxy.url("/v1/chat/completions"), body.to_owned());
        tokio::spawn(async move { post(&url, &[("authorization", "Bearer sk-a")], body).await })
    };
    // Both proxies get the same request at once: one fold between them.
    let requests: Vec<_> = (0..8).flat_map(|_| [ask(&a, &body), ask(&b, &body)]).collect();
    for request in requests {
        let answer = request.await.unwrap();
        assert_eq!(
            (answer.status, answer.header("x-chatfold-summarized")),
            (200, Some("true"))
        );
    }
    assert_eq!(counting.calls(), 1);
    // A third proxy, its own cache empty, finds the summary in Redis.
    let c = Proxy::start(&args);
    let answer = ask(&c, &body).await.unwrap();
    assert_eq!(answer.header("x-chatfold-cache"), Some("hit"));
    assert_eq!(counting.calls(), 1);
    // Without Redis, a new fold is still served.
    redis.kill();
    let longer = openai_body(40).to_string();
    let answer = ask(&a, &longer).await.unwrap();
    assert_eq!(
        (answer.status, answer.header("x-chatfold-summarized")),
        (200, Some("true"))
    );
    check_openai(&up.seen().last().unwrap().json());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retrying_http_summarizer_is_still_called_once_for_identical_requests() {
    let up = ok_upstream().await;
    // A summarizer that is down: every attempt answers 503 at once.
    let down = Upstream::start(|_| {
        Reply::Full(
            503,
            vec![("content-type", "application/json".to_owned())],
            "{}".to_owned(),
        )
    })
    .await;
    let summarizer = format!("{}/v1", down.url());
    let proxy = Proxy::start(&[
        "--upstream",
        &up.url(),
        "--budget",
        "400",
        "--summarize-url",
        &summarizer,
        "--summarize-model",
        "m",
        // One attempt may take 0.2 s, but the call retries three times with
        // its backoff between: the waiters wait for the whole call.
        "--summarize-timeout",
        "0.2",
        "--summarize-retries",
        "3",
        "--quiet",
    ]);
    for answer in at_once(&proxy, 4, &openai_body(30).to_string()).await {
        assert_eq!(answer.status, 200);
        assert!(answer.header("x-chatfold-fallback").is_some());
    }
    // One call: its four attempts, not four calls of four.
    assert_eq!(down.seen().len(), 4);
}
