//! The summarizers `compact` can use: the library's extractive one, a shell
//! command (a child process with a deadline) and the HTTP ones, with the
//! rules for which API key may be sent to which host.

use std::io::{Read, Write};
use std::net::IpAddr;
use std::process::{Command, Stdio};
#[cfg(unix)]
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chatfold::summarize::{Named, SummarizerSpec};
use chatfold::{NamedCounter, Summarizer, SummaryRequest};

use crate::flags::{Provider, SummarizeArgs};
use crate::messages;
use crate::{Failure, exit};

/// How long a shell command may take by default.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// How long one HTTP attempt may take by default.
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest timeout a flag gives (the library's HTTP summarizer has the
/// same bound): a deadline past it would not fit the clock's arithmetic,
/// and it is as good as none.
pub(crate) const LONGEST_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 86_400);

/// The summarizer the flags chose.
pub(crate) enum Chosen {
    /// The library's by name: the extractive one (no model, no network),
    /// or `--summarize-url` speaking Chat Completions or Anthropic Messages.
    Named(Named<NamedCounter>),
    /// `--summarize-cmd`.
    Shell(ShellSummarizer),
}

impl Chosen {
    /// The summarizer the flags name, its key read from the environment.
    /// Nothing is sent or run yet.
    pub(crate) fn new(args: &SummarizeArgs, counter: NamedCounter) -> Result<Chosen, Failure> {
        let timeout = match args.summarize_timeout {
            Some(secs) if secs > 0.0 && Duration::try_from_secs_f64(secs).is_ok() => {
                Some(Duration::from_secs_f64(secs).min(LONGEST_TIMEOUT))
            }
            Some(_) => return Err(Failure::new(exit::USAGE, messages::BAD_TIMEOUT)),
            None => None,
        };
        if let Some(command) = &args.summarize_cmd {
            return Ok(Chosen::Shell(ShellSummarizer {
                command: command.clone(),
                timeout: timeout.unwrap_or(COMMAND_TIMEOUT),
            }));
        }
        let (Some(url), Some(model)) = (&args.summarize_url, &args.summarize_model) else {
            let spec = SummarizerSpec::new("extractive");
            return Ok(Chosen::Named(
                Named::with_counter(&spec, counter).map_err(chatfold::Error::InvalidConfig)?,
            ));
        };
        let Some((scheme, host)) = url_host(url) else {
            return Err(Failure::new(exit::USAGE, messages::bad_url(url)));
        };
        let provider = args.summarize_provider.unwrap_or_else(|| default_provider(&host));
        let read = |var: &str| std::env::var(var).ok();
        let key = api_key(scheme, &host, provider, args.api_key_env.as_deref(), read)?;
        let kind = match provider {
            Provider::Openai => "openai",
            Provider::Anthropic => "anthropic",
        };
        let mut spec = SummarizerSpec::http(kind, url, model);
        spec.api_key = key;
        spec.timeout = Some(timeout.unwrap_or(HTTP_TIMEOUT));
        spec.retries = Some(args.summarize_retries);
        Ok(Chosen::Named(
            Named::with_counter(&spec, counter).map_err(chatfold::Error::InvalidConfig)?,
        ))
    }
}

impl Summarizer for Chosen {
    type Error = chatfold::BoxError;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, Self::Error> {
        match self {
            Chosen::Named(s) => s.summarize(request),
            Chosen::Shell(s) => Ok(s.summarize(request)?),
        }
    }
}

impl Chosen {
    /// The longest one summary can take: a command's timeout, an HTTP
    /// summarizer's every attempt and wait, no time for the built-in one.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub(crate) fn longest_call(&self) -> Duration {
        match self {
            Chosen::Named(s) => s.longest_call(),
            Chosen::Shell(s) => s.timeout,
        }
    }
}

/// The provider's default key variable and the domain it may be sent to.
fn defaults(provider: Provider) -> (&'static str, &'static str) {
    match provider {
        Provider::Openai => ("OPENAI_API_KEY", "openai.com"),
        Provider::Anthropic => ("ANTHROPIC_API_KEY", "anthropic.com"),
    }
}

/// The API shape a host speaks unless told: Anthropic's on anthropic.com,
/// else OpenAI's (which most servers copy).
pub(crate) fn default_provider(host: &str) -> Provider {
    if is_own_host(host, "anthropic.com") {
        Provider::Anthropic
    } else {
        Provider::Openai
    }
}

/// The API key to send to `host`, read with `env`.
///
/// A variable named with `--api-key-env` is sent anywhere (empty: no key).
/// The provider's default variable is sent only to its own domain (where a
/// key is required) and to local servers (where it is optional); any other
/// host needs `--api-key-env`.
pub(crate) fn api_key(
    scheme: &str,
    host: &str,
    provider: Provider,
    named: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, Failure> {
    let read = |var: &str| env(var).map(|k| k.trim().to_owned());
    if let Some(var) = named {
        return match read(var) {
            Some(key) => Ok(Some(key).filter(|k| !k.is_empty())),
            None => Err(Failure::new(exit::USAGE, messages::key_var_unset(var))),
        };
    }
    let (var, domain) = defaults(provider);
    let key = read(var).filter(|k| !k.is_empty());
    if is_local(host) {
        Ok(key)
    } else if is_own_host(host, domain) {
        key.map(Some)
            .ok_or_else(|| Failure::new(exit::USAGE, messages::key_missing(scheme, host, var)))
    } else {
        Err(Failure::new(
            exit::USAGE,
            messages::key_not_sent(scheme, host, var, domain),
        ))
    }
}

/// Whether `host` is `domain` or one of its subdomains.
pub(crate) fn is_own_host(host: &str, domain: &str) -> bool {
    host == domain
        || host
            .strip_suffix(domain)
            .is_some_and(|sub| sub.ends_with('.') && sub.len() > 1)
}

/// The scheme and host of an http(s) URL: the host lowercased, without a
/// final dot, brackets or port. `None` for another scheme, no host, or an
/// authority with anything a URL parser might read another way (a
/// backslash, spaces, a non-numeric port, a malformed IPv6 literal).
pub(crate) fn url_host(url: &str) -> Option<(&str, String)> {
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme, "http" | "https") {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((userinfo, hostport)) => (userinfo, hostport),
        None => ("", authority),
    };
    let userinfo_char = |c: char| c.is_ascii_alphanumeric() || "-._~%!$&'()*+,;=:".contains(c);
    if !userinfo.chars().all(userinfo_char) {
        return None;
    }
    let port_ok = |port: &str| port.chars().all(|c| c.is_ascii_digit());
    let host = match hostport.strip_prefix('[') {
        Some(v6) => {
            let (ip, after) = v6.split_once(']')?;
            ip.parse::<std::net::Ipv6Addr>().ok()?;
            match after.strip_prefix(':') {
                Some(port) if port_ok(port) => ip,
                None if after.is_empty() => ip,
                _ => return None,
            }
        }
        None => {
            let (host, port) = hostport.split_once(':').unwrap_or((hostport, ""));
            let host_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
            if !host.chars().all(host_char) || !port_ok(port) {
                return None;
            }
            host
        }
    };
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    (!host.is_empty() && !host.starts_with('.')).then_some((scheme, host))
}

/// Whether `host` (lowercase, as [`url_host`] gives it) is this machine or
/// a private network's: loopback, private and unique-local addresses,
/// `localhost` and `.local` names.
pub(crate) fn is_local(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") || host.ends_with(".local") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_unspecified(),
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.is_unspecified() || (ip.segments()[0] & 0xfe00) == 0xfc00
        }
        Err(_) => false,
    }
}

/// Runs a shell command as the summarizer.
pub(crate) struct ShellSummarizer {
    /// What `sh -c` runs.
    command: String,
    /// How long it may run before it is killed.
    timeout: Duration,
}

impl Summarizer for ShellSummarizer {
    type Error = String;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, String> {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(&self.command)
            .env("CHATFOLD_MAX_SUMMARY_TOKENS", request.allowance().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A group of its own, so that the deadline ends whatever it started
        // too (one holding its pipes would keep the wait, or the
        // transcript's writer, from ending).
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().map_err(messages::cannot_run_command)?;
        #[cfg(unix)]
        let group = Commands::add(&mut child)?;
        let stdin = child.stdin.take();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                // A command that exits without reading its input is not an error here.
                if let Some(stdin) = stdin {
                    let mut pipe = std::io::BufWriter::with_capacity(1 << 16, stdin);
                    let _ = request.write_transcript(&mut pipe).and_then(|()| pipe.flush());
                }
            });
            #[cfg(unix)]
            RUNNING.store(libc::pid_t::try_from(child.id()).unwrap_or(0), Ordering::SeqCst);
            let answer = self.wait(&mut child);
            #[cfg(unix)]
            {
                RUNNING.store(0, Ordering::SeqCst);
                Commands::remove(group);
                // A command ended by an interrupt's handler is no answer: the
                // handler ends this process (it may not have yet, on another
                // thread), and nothing is written meanwhile.
                while INTERRUPTED.load(Ordering::SeqCst) {
                    std::thread::park();
                }
            }
            answer
        })
    }
}

/// The process group of the summarize command running now (0 for none),
/// which [`pass_on_signals`]'s handler signals.
#[cfg(unix)]
static RUNNING: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The process groups of the summarize commands running now, on any
/// thread, and whether this process is ending: what [`end_commands`]
/// kills. (Not for a signal's handler, which may take no lock: it has
/// [`RUNNING`].)
#[cfg(unix)]
static GROUPS: std::sync::Mutex<Commands> = std::sync::Mutex::new(Commands {
    groups: Vec::new(),
    ending: false,
});

/// What [`GROUPS`] holds.
#[cfg(unix)]
struct Commands {
    groups: Vec<libc::pid_t>,
    ending: bool,
}

#[cfg(unix)]
impl Commands {
    fn lock() -> std::sync::MutexGuard<'static, Commands> {
        GROUPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes `child`'s group (its id), or, once this process is ending,
    /// kills it: a command started after [`end_commands`] ran does not
    /// outlive this process either.
    fn add(child: &mut std::process::Child) -> Result<libc::pid_t, String> {
        let group = libc::pid_t::try_from(child.id()).unwrap_or(0);
        let mut running = Commands::lock();
        if running.ending {
            drop(running);
            kill_group(child);
            let _ = child.wait();
            return Err(messages::ENDING.to_owned());
        }
        running.groups.push(group);
        Ok(group)
    }

    /// Forgets `group`: its command has ended (or was killed).
    fn remove(group: libc::pid_t) {
        let mut running = Commands::lock();
        if let Some(at) = running.groups.iter().position(|&g| g == group) {
            running.groups.swap_remove(at);
        }
    }
}

/// Kills every summarize command running now, with what it started in its
/// group, and any started from now on: for `serve`, whose folds may still
/// wait on one when the shutdown's timeout has passed (a command left
/// running would outlive the process).
pub(crate) fn end_commands() {
    #[cfg(unix)]
    {
        let mut running = Commands::lock();
        running.ending = true;
        running.groups.iter().for_each(|&group| kill_group_of(group));
    }
}

/// Whether [`pass_on_signals`]'s handler ran: the process is ending.
#[cfg(unix)]
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes an interrupt, a termination or a hang-up end the running
/// summarize command too, then this process as it would have ended. In a
/// process group of its own, the command is not sent what the terminal
/// sends chatfold's; its whole group is sent SIGTERM (which, unlike an
/// interrupt, a shell's background jobs do not ignore). For `compact`,
/// which handles no signal itself; a signal this process was started
/// ignoring stays ignored.
pub(crate) fn pass_on_signals() {
    #[cfg(unix)]
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: `sigaction` reads and writes the structs given; the
        // handler calls only async-signal-safe functions and reads an atomic.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL {
                continue;
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(signal, &new, std::ptr::null_mut());
        }
    }
}

/// [`pass_on_signals`]'s handler: SIGTERM to the command's group, then
/// the signal to this process with its default action, unblocked so that
/// it ends the process at once (a signal being handled is blocked until
/// its handler returns, and meanwhile another thread could see the
/// command end and go on; [`INTERRUPTED`] stops it).
#[cfg(unix)]
extern "C" fn on_signal(signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    let group = RUNNING.load(Ordering::SeqCst);
    // SAFETY: `signal`, `kill`, `sigemptyset`, `sigaddset`,
    // `pthread_sigmask` and `raise` are async-signal-safe; the set is a
    // local the calls initialize.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        if group > 0 {
            libc::kill(-group, libc::SIGTERM);
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(signal);
    }
}

impl ShellSummarizer {
    /// Waits for the command (killing it at the deadline) and for its
    /// output's end, and takes its answer.
    fn wait(&self, child: &mut std::process::Child) -> Result<String, String> {
        use std::sync::mpsc::RecvTimeoutError;
        // Each reader drops its `closed` at its pipe's end, which a command
        // reaches as it exits: the end of both wakes the wait at once.
        let (closed, ended) = std::sync::mpsc::channel::<()>();
        let stdout = child.stdout.take().map(|pipe| reader(pipe, closed.clone()));
        let stderr = child.stderr.take().map(|pipe| reader(pipe, closed));
        let deadline = Instant::now() + self.timeout;
        let timed_out = || Err(messages::command_timed_out(self.timeout.as_secs_f64()));
        // Until the pipes end, a look at least every `LOOK`; after (a command
        // exits right after, or gave its pipes away), naps that double from
        // `FIRST_NAP`.
        const LOOK: Duration = Duration::from_millis(5);
        const FIRST_NAP: Duration = Duration::from_micros(50);
        let (mut open, mut nap) = (true, FIRST_NAP);
        let status = loop {
            let now = Instant::now();
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if now >= deadline => {
                    kill_group(child);
                    let _ = child.wait();
                    return timed_out();
                }
                Ok(None) if open => {
                    let look = LOOK.min(deadline - now);
                    open = ended.recv_timeout(look) == Err(RecvTimeoutError::Timeout);
                }
                Ok(None) => {
                    std::thread::sleep(nap.min(deadline - now));
                    nap = (nap * 2).min(LOOK);
                }
                Err(e) => return Err(messages::cannot_wait_command(e)),
            }
        };
        // A process the command started may hold its pipes still: its
        // output has not ended, and the deadline holds for it too (the
        // readers are left to end with it). A command that exits at its
        // deadline has `DRAIN` for its readers to reach the pipes' end.
        const DRAIN: Duration = Duration::from_millis(50);
        if open {
            let left = deadline.saturating_duration_since(Instant::now()).max(DRAIN);
            if ended.recv_timeout(left) == Err(RecvTimeoutError::Timeout) {
                kill_group(child);
                return match status.success() {
                    true => timed_out(),
                    false => Err(messages::command_failed(&exit_code(status), "")),
                };
            }
        }
        let out = stdout.map(join_reader).unwrap_or_default();
        let err = stderr.map(join_reader).unwrap_or_default();
        if !status.success() {
            return Err(messages::command_failed(&exit_code(status), err.trim()));
        }
        // Trimmed, and refused when blank, by the library (`FoldPolicy::accept`).
        Ok(out)
    }
}

/// How a command ended, for its error: `status N`, or `a signal`.
fn exit_code(status: std::process::ExitStatus) -> String {
    status
        .code()
        .map_or("a signal".to_owned(), |c| format!("status {c}"))
}

/// Kills `child` and the processes of its group (see
/// [`ShellSummarizer::summarize`]), those it started and that stayed in it.
fn kill_group(child: &mut std::process::Child) {
    // The group's id is the child's. An id is given to a new process only
    // once no process has it as its own or its group's, and ids are given
    // in turn, so within a deadline it names this group.
    #[cfg(unix)]
    if let Ok(group) = libc::pid_t::try_from(child.id()) {
        kill_group_of(group);
    }
    let _ = child.kill();
}

/// Kills the processes of the group `group` (none for 0 or less).
#[cfg(unix)]
fn kill_group_of(group: libc::pid_t) {
    if group > 0 {
        // SAFETY: `kill` takes plain integers and touches no memory.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
}

/// Reads a pipe to its end on a thread of its own, then drops `closed`
/// (which tells the receiver, once every sender is gone, that the pipes
/// have ended).
fn reader(
    mut pipe: impl Read + Send + 'static,
    closed: std::sync::mpsc::Sender<()>,
) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        drop(closed);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// What a [`reader`] read (nothing if it panicked).
fn join_reader(handle: std::thread::JoinHandle<String>) -> String {
    handle.join().unwrap_or_default()
}

#[cfg(test)]
mod tests;
