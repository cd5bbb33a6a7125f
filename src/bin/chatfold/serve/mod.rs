//! `chatfold serve`: a compaction proxy in front of an OpenAI- or
//! Anthropic-compatible API.
//!
//! The rooms: `config` (what the flags mean: upstreams, budgets, limits),
//! `route` (where a request goes, the marks handlers leave for the
//! layers), `proxy` (the handlers: reading, forwarding, the proxy's
//! headers), `layers` (around them: metrics and the log line, error shapes,
//! draining an unread body), `fold` (a chat body through the compactor,
//! with the fallback summary), `flight` (one summarizer call per fold at a
//! time), `tenant` (the server's secret, tenants' namespaces, the shared
//! cache), `compaction` (the Responses API's compaction for any model:
//! sealed items, `context_management`, `/v1/responses/compact`), `managed`
//! (Anthropic's context management for any upstream: sealed compaction
//! blocks, clearing), `events` (a stream's events rewritten as they pass),
//! `upstream` (the client and header hygiene), `errors` (answers in
//! each API's shape), `metrics` (`/metrics`). This file builds the state
//! and the service, runs the server and shuts it down gracefully.

mod compaction;
mod config;
mod errors;
mod events;
mod fleet;
mod flight;
mod fold;
mod layers;
mod managed;
mod metrics;
mod proxy;
mod route;
mod tenant;
mod upstream;

use std::sync::Arc;
use std::time::Duration;

use chatfold::cache::RedisCache;
use chatfold::{Extractive, NamedCounter};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::RequestBodyTimeoutLayer;

use self::layers::{Drained, Handler, LayerFn};
pub(crate) use crate::flags::{CompactionMode, ManagedMode, ServeArgs};
use crate::summarizers::Chosen;
use crate::{Failure, exit, setup};

/// What every request shares.
pub(crate) struct App {
    /// The flags, checked.
    config: config::Config,
    /// What the fold step works with.
    folding: Arc<fold::Folding>,
    /// The counters.
    metrics: metrics::Metrics,
    /// The way upstream.
    client: upstream::Client,
}

/// The default wait for a fold in flight, past the summarizer's own
/// time-out.
const FLIGHT_SLACK: Duration = Duration::from_secs(5);

/// `chatfold serve`: builds the state, listens, serves until SIGTERM or
/// Ctrl-C, then lets in-flight requests finish.
pub(crate) fn serve(args: &ServeArgs) -> Result<(), Failure> {
    let config = config::Config::new(args)?;
    if config.budgets.none() {
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
    let secret = tenant::secret(secret_flag.as_deref());
    let folding = fold::Folding {
        base: setup::folding(1, counter, &args.fold),
        fold_to: args.fold.fold_to,
        breakpoints: args.fold.cache_breakpoints,
        budgets: config.budgets.clone(),
        summarizer,
        summarizer_name: setup::namespace(&args.summarize),
        fallback: Extractive::with_counter(counter),
        cache: Arc::new(tenant::Shared::new(args.cache_entries, redis)),
        secret,
        seal: compaction::Seal::new(&secret),
        flights: flight::Flights::new(longest * 2, flight::LINGER, fleet),
    };
    // The ledger's patterns built before the first request needs them.
    folding.base.policy.prepare();
    let app = Arc::new(App {
        client: upstream::client(&config),
        config,
        folding: Arc::new(folding),
        metrics: metrics::Metrics::default(),
    });
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
    let mut signal = std::pin::pin!(shutdown_signal());
    let service = service(&app);
    let graceful = GracefulShutdown::new();
    eprintln!("chatfold serve: listening on http://{local}");
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of descriptors, say: try again shortly, not at once.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(app.config.read_timeout)
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service.clone()));
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

/// The service every connection runs: the handlers inside their layers,
/// outermost first (see `layers`).
fn service(app: &Arc<App>) -> impl Handler {
    let config = &app.config;
    let (max_body, read_timeout) = (config.max_body, config.read_timeout);
    let limit = usize::try_from(max_body).unwrap_or(usize::MAX);
    let handlers = {
        let app = Arc::clone(app);
        tower::service_fn(move |request| proxy::handle(Arc::clone(&app), request))
    };
    let observed = Arc::clone(app);
    tower::ServiceBuilder::new()
        .layer(LayerFn(move |inner| {
            layers::observe(Arc::clone(&observed), inner)
        }))
        .layer(LayerFn(move |inner| layers::own_errors(max_body, inner)))
        .map_request(move |request| Drained::request(request, read_timeout))
        .layer(RequestBodyLimitLayer::new(limit))
        .layer(RequestBodyTimeoutLayer::new(read_timeout))
        .service(handlers)
}

/// Resolves on Ctrl-C or SIGTERM. The handlers are installed when this is
/// called, not when it is first polled: a signal that comes as soon as the
/// proxy says it listens still shuts it down gracefully.
fn shutdown_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    let (interrupt, term) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::interrupt()).ok(),
            signal(SignalKind::terminate()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let received = |stream: Option<tokio::signal::unix::Signal>| async move {
                match stream {
                    Some(mut stream) => {
                        stream.recv().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = received(interrupt) => {}
                () = received(term) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
