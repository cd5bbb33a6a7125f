//! `RedisCache` against a real `redis-server` that each test starts on a
//! loopback port of its own (`.ci/run` installs it from Debian's packages).
//! Where it cannot be found, each test says so on stderr and stops, or
//! fails under `CHATFOLD_REQUIRE_REDIS=1` (as in `.ci/run`).
#![cfg(feature = "redis")]

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chatfold::cache::{RedisCache, SummaryCache};
use chatfold::testing::Recording;
use chatfold::{Compactor, SummaryRequest};
use common::conversation;
use common::redis_server::Server;

fn summarize(r: &SummaryRequest<'_>) -> Result<String, std::convert::Infallible> {
    Ok(format!("{} turns about billing options", r.messages().len()))
}

#[test]
fn two_compactors_share_a_fold_with_a_prefix_and_a_ttl() {
    let Some(server) = Server::start() else { return };
    let h = conversation(40);
    let cache = |prefix: &str| {
        Arc::new(
            RedisCache::new(&server.url())
                .unwrap()
                .prefix(prefix)
                .ttl(Duration::from_secs(600)),
        )
    };
    let one = Compactor::new(400).cache(cache("app1:"), "model");
    let first = Recording::new(summarize);
    let a = one.compact(&h, &first).unwrap();
    assert_eq!(first.calls().len(), 1);

    // Another compactor, another connection: no summarizer call.
    let two = Compactor::new(400).cache(cache("app1:"), "model");
    let second = Recording::new(summarize);
    let b = two.compact(&h, &second).unwrap();
    assert!(second.calls().is_empty());
    assert_eq!(a.messages, b.messages);

    // Another prefix is another cache.
    let three = Compactor::new(400).cache(cache("app2:"), "model");
    let third = Recording::new(summarize);
    three.compact(&h, &third).unwrap();
    assert_eq!(third.calls().len(), 1);

    // One fold: its summary, and the record a later request replays.
    let keys = server.command(&["KEYS", "app1:chatfold:v*"]).unwrap();
    assert_eq!(keys, "*2", "one fold, one summary and one record");
    let records = server.command(&["KEYS", "app1:chatfold:v*:step:*"]).unwrap();
    assert_eq!(records, "*1", "one fold, one record");
    let count = server.command(&["DBSIZE"]).unwrap();
    assert_eq!(count, ":4");
}

#[test]
fn values_expire_and_get_many_answers_in_order() {
    let Some(server) = Server::start() else { return };
    let cache = RedisCache::new(&server.url())
        .unwrap()
        .ttl(Duration::from_secs(100));
    cache.put("k1", "one".into());
    cache.put("k3", "three".into());
    let keys: Vec<String> = ["k1", "k2", "k3"].map(str::to_owned).to_vec();
    assert_eq!(
        cache.get_many(&keys),
        [Some("one".to_owned()), None, Some("three".to_owned())]
    );
    let ttl: i64 = server.command(&["TTL", "chatfold:k1"]).unwrap()[1..]
        .parse()
        .unwrap();
    assert!((90..=100).contains(&ttl), "{ttl}");
}

#[test]
fn an_outage_degrades_to_no_cache_and_recovers() {
    let Some(mut server) = Server::start() else { return };
    let port = server.port;
    let h = conversation(40);
    let cache = RedisCache::new(&server.url())
        .unwrap()
        .timeout(Duration::from_millis(100))
        .pause(Duration::from_millis(300));
    let compactor = Compactor::new(400).cache(Arc::new(cache), "model");
    compactor.compact(&h, &summarize).unwrap();

    server.kill();
    let down = Recording::new(summarize);
    let start = Instant::now();
    let result = compactor.compact(&h, &down).unwrap();
    assert!(result.summarized);
    assert_eq!(down.calls().len(), 1, "no cache: the summarizer runs");
    // Within the pause, Redis is not asked again: no time-out to wait for.
    let quiet = Instant::now();
    compactor.compact(&h, &summarize).unwrap();
    assert!(
        quiet.elapsed() < Duration::from_millis(100),
        "{:?}",
        quiet.elapsed()
    );
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());

    // Back up (empty): the cache fills again and serves.
    let Some(_server) = Server::on(port) else { return };
    std::thread::sleep(Duration::from_millis(400));
    compactor.compact(&h, &summarize).unwrap();
    let back = Recording::new(summarize);
    compactor.compact(&h, &back).unwrap();
    assert!(back.calls().is_empty(), "the cache serves again after the outage");
}

#[cfg(feature = "cli")]
#[test]
fn separate_processes_share_a_fold_through_the_cli() {
    let Some(server) = Server::start() else { return };
    let dir = std::env::temp_dir().join(format!("chatfold-redis-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let calls = dir.join("calls");
    let cmd = format!(
        "echo call >> {}; echo 'The user set up billing options.'",
        calls.display()
    );
    let input = serde_json::to_vec(&conversation(40)).unwrap();
    for _ in 0..3 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_chatfold"))
            .args([
                "compact",
                "--budget",
                "400",
                "--tokenizer",
                "heuristic",
                "--summarize-cmd",
                &cmd,
            ])
            .args(["--cache-redis", &server.url()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&input).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("The user set up billing options."));
    }
    let lines = std::fs::read_to_string(&calls).unwrap().lines().count();
    assert_eq!(lines, 1, "three processes, one summarizer call");
    std::fs::remove_dir_all(&dir).unwrap();
}
