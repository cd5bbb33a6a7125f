//! `chatfold serve`: a compaction proxy in front of an OpenAI- or
//! Anthropic-compatible API.
//!
//! The rooms: `config` (what the flags mean: upstreams, budgets, limits),
//! `proxy` (the handler: routes, limits, forwarding, the proxy's headers
//! and log line), `fold` (a chat body through the compactor, with the
//! fallback summary), `flight` (one summarizer call per fold at a time),
//! `tenant` (the server's secret, tenants' namespaces, the shared cache),
//! `upstream` (the client and header hygiene), `errors` (answers in each
//! API's shape), `metrics` (`/metrics`). This file builds the state, runs
//! the server and shuts it down gracefully.

mod config;
mod errors;
mod fleet;
mod flight;
mod fold;
mod metrics;
mod proxy;
mod tenant;
mod upstream;

use std::sync::Arc;
use std::time::Duration;

use chatfold::cache::{RedisCache, SummaryCache};
use chatfold::{Compactor, Extractive, NamedCounter};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::flags::ServeArgs;
use crate::summarizers::Chosen;
use crate::{Failure, exit, setup};

/// What every request shares.
pub(crate) struct App {
    /// The flags, checked.
    config: config::Config,
    /// The compactor every request's is cloned from (its budget and cache
    /// set per request).
    base: Compactor<NamedCounter>,
    /// The configured summarizer.
    summarizer: Chosen,
    /// Its name in cache namespaces.
    summarizer_name: String,
    /// What stands in when it fails.
    fallback: Extractive<NamedCounter>,
    /// Summaries: in process, and Redis when given.
    cache: Arc<dyn SummaryCache>,
    /// The server's secret (tenants' namespaces, fold keys).
    secret: [u8; 32],
    /// The folds in flight.
    flights: flight::Flights,
    /// The counters.
    metrics: metrics::Metrics,
    /// The way upstream.
    client: upstream::Client,
}

impl App {
    /// The compactor for one request: `budget`, and the cache in `namespace`.
    /// The compactor for a body that folds: `budget`, the tenant's cache
    /// under `namespace`, and every message counted, so that the tokens
    /// before (headers, log, metrics) are exact (a history that comes back
    /// every turn is counted from `Tiktoken`'s remembered counts).
    fn compactor(&self, budget: usize, namespace: &str) -> Compactor<NamedCounter> {
        let mut compactor = self.base.clone();
        compactor.budget = budget;
        compactor.count_all = true;
        compactor.cache(Arc::clone(&self.cache), namespace)
    }
}

/// The default wait for a fold in flight, past the summarizer's own
/// time-out.
const FLIGHT_SLACK: Duration = Duration::from_secs(5);

/// `chatfold serve`: builds the state, listens, serves until SIGTERM or
/// Ctrl-C, then lets in-flight requests finish.
pub(crate) fn serve(args: &ServeArgs) -> Result<(), Failure> {
    let config = config::Config::new(args)?;
    if config.budget.is_none() && config.model_budgets.is_empty() && config.model_windows.is_empty() {
        eprintln!("warning: no --budget, --model-budget or --model-window: every request passes through");
    }
    let counter = args.tokenizer.parse::<NamedCounter>()?;
    // The tokenizer's tables are built now, not on the first request.
    let _ = chatfold::TokenCounter::count(&counter, "warm");
    let summarizer = Chosen::new(&args.summarize, counter)?;
    let secret_flag = args.cache_secret.clone().or_else(|| {
        std::env::var("CHATFOLD_CACHE_SECRET")
            .ok()
            .filter(|s| !s.is_empty())
    });
    let redis = args.cache_redis.as_deref().map(RedisCache::new).transpose()?;
    if redis.is_some() && secret_flag.is_none() {
        eprintln!(
            "warning: --cache-redis without --cache-secret: this proxy's summaries are keyed with a secret of its own, \
             and no other process can reuse them"
        );
    }
    // A fold holds the fleet's lock for the longest its summary can take
    // (every attempt and wait of an HTTP summarizer); a request waiting in
    // this process may first see its leader wait that long on another
    // process's lock, then fold itself.
    let longest = summarizer.longest_call() + FLIGHT_SLACK;
    let fleet = args
        .cache_redis
        .as_deref()
        .map(|url| fleet::Fleet::new(url, longest))
        .transpose()
        .map_err(|e| Failure::new(exit::USAGE, e))?;
    // Folds run on blocking threads, each keeping the memos of what it read
    // (spans, texts): their number bounds that memory.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(usize::from(args.fold_threads))
        .enable_all()
        .build()
        .map_err(|e| Failure::new(exit::USAGE, format!("cannot start the runtime: {e}")))?;
    let entered = runtime.enter();
    let app = Arc::new(App {
        client: upstream::client(&config),
        config,
        base: setup::folding(1, counter, &args.fold),
        summarizer,
        summarizer_name: setup::namespace(&args.summarize),
        fallback: Extractive::with_counter(counter),
        cache: Arc::new(tenant::Shared::new(args.cache_entries, redis)),
        secret: tenant::secret(secret_flag.as_deref()),
        flights: flight::Flights::new(longest * 2, flight::LINGER, fleet),
        metrics: metrics::Metrics::default(),
    });
    // The ledger's patterns built before the first request needs them.
    app.base.policy.prepare();
    let outcome = runtime.block_on(run(app, args.listen));
    // Summarize commands that folds still wait on end with this process.
    crate::summarizers::end_commands();
    drop(entered);
    // Folds still on blocking threads (a summarizer retrying for a client
    // that is gone) do not hold the exit past the shutdown timeout.
    runtime.shutdown_background();
    outcome
}

/// Accepts connections until a signal, then drains them.
async fn run(app: Arc<App>, listen: std::net::SocketAddr) -> Result<(), Failure> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| Failure::new(exit::USAGE, format!("cannot listen on {listen}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Failure::new(exit::USAGE, format!("cannot listen on {listen}: {e}")))?;
    eprintln!("chatfold serve: listening on http://{local}");
    let graceful = GracefulShutdown::new();
    let mut signal = std::pin::pin!(shutdown_signal());
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of descriptors, say: try again shortly, not at once.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let shared = Arc::clone(&app);
                let service = service_fn(move |request| proxy::handle(Arc::clone(&shared), request));
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(app.config.read_timeout)
                    .serve_connection(TokioIo::new(stream), service);
                let watched = graceful.watch(connection);
                tokio::spawn(async move {
                    let _ = watched.await;
                });
            }
            () = &mut signal => break,
        }
    }
    drop(listener);
    eprintln!("chatfold serve: shutting down, letting in-flight requests finish");
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(app.config.shutdown_timeout) => {
            eprintln!("chatfold serve: requests still in flight after {} s; stopping", app.config.shutdown_timeout.as_secs_f64());
        }
    }
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
