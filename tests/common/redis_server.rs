//! A `redis-server` of a test's (or bench's) own, on a free loopback port.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The variable that makes a missing `redis-server` a failure, not a skip
/// (`.ci/run` sets it, so that CI never passes without the Redis tests).
pub const REQUIRE: &str = "CHATFOLD_REQUIRE_REDIS";

/// Says that the test cannot run for `why`: a panic (the test fails) when
/// `CHATFOLD_REQUIRE_REDIS=1`, otherwise `SKIPPED` on stderr, and the
/// caller returns.
pub fn unavailable(why: &str) {
    let required = std::env::var(REQUIRE).is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{why}, and {REQUIRE}=1 requires the Redis tests to run"
    );
    eprintln!(
        "SKIPPED: {why} (`.ci/run` installs it from Debian's packages; set {REQUIRE}=1 to make this a failure)"
    );
}

/// A `redis-server` on a free loopback port, stopped when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
}

impl Server {
    /// `None`, with a message, when `redis-server` is not installed (a
    /// panic instead under `CHATFOLD_REQUIRE_REDIS=1`: see [`unavailable`]).
    pub fn start() -> Option<Server> {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Server::on(port)
    }

    pub fn on(port: u16) -> Option<Server> {
        let spawned = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                unavailable(&format!("redis-server cannot be started ({e})"));
                return None;
            }
        };
        let server = Server { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.command(&["PING"]).is_none() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(server)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// One command in RESP; its reply's first line.
    pub fn command(&self, args: &[&str]) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut request = format!("*{}\r\n", args.len());
        for a in args {
            request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        stream.write_all(request.as_bytes()).ok()?;
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).ok()?;
        Some(line.trim_end().to_owned())
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}
