//! The proxy's own life: streamed answers as they come, its health and
//! metrics, and a shutdown that ends what it started.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::proxy::{Proxy, post, send};
use crate::upstream::{Reply, Upstream};
use crate::{ok_upstream, openai_body};

/// An upstream sending server-sent events held at `gate` after the first.
async fn events_upstream(gate: Arc<Notify>) -> Upstream {
    Upstream::start(move |_| Reply::Events {
        first: "data: {\"n\": 1}\n\n".to_owned(),
        rest: vec!["data: {\"n\": 2}\n\n".to_owned(), "data: [DONE]\n\n".to_owned()],
        gate: Arc::clone(&gate),
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn events_reach_the_client_as_the_upstream_sends_them() {
    use http_body_util::BodyExt as _;
    let gate = Arc::new(Notify::new());
    let up = events_upstream(Arc::clone(&gate)).await;
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "400"]);
    let response = send(
        "POST",
        &proxy.url("/v1/chat/completions"),
        &[],
        openai_body(30).to_string(),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["x-chatfold-summarized"], "true");
    let mut body = response.into_body();
    // The first event arrives while the upstream still holds the rest.
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(&first[..], b"data: {\"n\": 1}\n\n");
    gate.notify_one();
    let rest = body.collect().await.unwrap().to_bytes();
    assert_eq!(&rest[..], b"data: {\"n\": 2}\n\ndata: [DONE]\n\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn health_and_metrics_are_the_proxys_own() {
    let up = ok_upstream().await;
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "400"]);
    post(
        &proxy.url("/v1/chat/completions"),
        &[],
        openai_body(30).to_string(),
    )
    .await;
    post(
        &proxy.url("/v1/chat/completions"),
        &[],
        openai_body(1).to_string(),
    )
    .await;
    let health = send("GET", &proxy.url("/healthz"), &[], "").await;
    assert_eq!(health.status(), 200);
    let text = crate::proxy::metrics(&proxy).await;
    for line in [
        "chatfold_requests_total{route=\"chat_completions\",status=\"200\"} 2",
        "chatfold_requests_total{route=\"healthz\",status=\"200\"} 1",
        "chatfold_compacted_requests_total 1",
        "chatfold_summarizer_calls_total 1",
        "chatfold_cache_misses_total 1",
        "chatfold_added_latency_seconds_count 3",
        "# TYPE chatfold_added_latency_seconds histogram",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
    assert_eq!(up.seen().len(), 2, "health and metrics never go upstream");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_lets_an_in_flight_stream_finish_and_refuses_new_requests() {
    use http_body_util::BodyExt as _;
    let gate = Arc::new(Notify::new());
    let up = events_upstream(Arc::clone(&gate)).await;
    let mut proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "400"]);
    let response = send(
        "POST",
        &proxy.url("/v1/chat/completions"),
        &[],
        openai_body(2).to_string(),
    )
    .await;
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(&first[..], b"data: {\"n\": 1}\n\n");
    proxy.terminate();
    // Once the proxy says it is shutting down, it accepts no connection.
    proxy.stderr_with("shutting down");
    assert!(tokio::net::TcpStream::connect(proxy.addr).await.is_err());
    gate.notify_one();
    let rest = body.collect().await.unwrap().to_bytes();
    assert_eq!(&rest[..], b"data: {\"n\": 2}\n\ndata: [DONE]\n\n");
    assert!(tokio::task::spawn_blocking(move || proxy.wait()).await.unwrap());
}

/// Whether the process `pid` has ended (gone, or a zombie no one reaps).
fn ended(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shutdown_timeout_holds_and_ends_the_summarize_command_in_flight() {
    let up = ok_upstream().await;
    let pids = std::env::temp_dir().join(format!("chatfold-serve-{}-pids", std::process::id()));
    let _ = std::fs::remove_file(&pids);
    // The shell and what it started, each recorded: both must end.
    let slow = format!(
        "echo $$ > '{0}'; sleep 60 & echo $! >> '{0}'; cat > /dev/null; wait; echo late",
        pids.display()
    );
    let mut proxy = Proxy::start(&[
        "--upstream",
        &up.url(),
        "--budget",
        "400",
        "--summarize-cmd",
        &slow,
        "--shutdown-timeout",
        "1",
        "--quiet",
    ]);
    let url = proxy.url("/v1/chat/completions");
    let request = tokio::spawn(async move { post(&url, &[], openai_body(30).to_string()).await });
    let started = Instant::now();
    let recorded = loop {
        let text = std::fs::read_to_string(&pids).unwrap_or_default();
        let recorded: Vec<String> = text.lines().map(str::to_owned).collect();
        if recorded.len() == 2 {
            break recorded;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the command did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        recorded.iter().all(|pid| !ended(pid)),
        "running before the shutdown"
    );
    let start = Instant::now();
    proxy.terminate();
    let _ = tokio::task::spawn_blocking(move || proxy.wait()).await.unwrap();
    // The summarizer would take 60 s; the process is gone soon after the
    // second the shutdown allows.
    assert!(start.elapsed() < Duration::from_secs(15), "{:?}", start.elapsed());
    // Killed with the proxy, not left running its minute.
    let gone = Instant::now();
    while !recorded.iter().all(|pid| ended(pid)) {
        assert!(
            gone.elapsed() < Duration::from_secs(5),
            "{recorded:?} outlived the proxy"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    request.abort();
    let _ = std::fs::remove_file(&pids);
}
