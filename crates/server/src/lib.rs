//! The provider's side: a [`Server`] accepts connections and runs each request through
//! the request path that `pipeline.rs` lists in order (one stage per file in `stages/`;
//! `docs/architecture.md` draws it). Every method's requests, answers by class and
//! handler latency are counted on the way (`stats`), for [`Server::stats`].

mod context;
mod handler;
mod limiter_slot;
mod pipeline;
pub mod stages;
pub mod stats;
mod trace;

pub use axle_wire::ContentType;
pub use context::Context;
pub use handler::{Handler, HandlerFuture, Request, Response, Status};
pub use limiter_slot::LimiterSlot;
pub use stats::{MethodView, ServerView};

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tokio::sync::watch;

use axle_plugin_host::kinds::limiter::LimiterPlugin;
use axle_plugin_host::kinds::serializer::SerializerPlugin;
use axle_transport::serve::{self, Connections, Dispatch, Peer, ServeLimits};
use axle_transport::tls::ServerTls;
use axle_wire::{Frame, Limits};

/// Builds a server: handlers, plugins, limits.
#[derive(Default)]
pub struct ServerBuilder {
    /// service → method → handler (looked up by `&str`, no allocation per request).
    handlers: FxHashMap<String, FxHashMap<String, Handler>>,
    /// Services whose every method one handler serves (`echo`).
    any_method: FxHashMap<String, Handler>,
    limiter: Option<Arc<LimiterPlugin>>,
    /// The manifest entry the limiter came from and its bytes' digest (to tell a new
    /// version on a swap).
    limiter_spec: Option<(axle_manifest::PluginSpec, [u8; 32])>,
    /// `[slots] shadow-limiter`, filled from the manifest.
    shadow_limiter: stages::shadow_limit::Slot,
    serializers: HashMap<String, Arc<SerializerPlugin>>,
    /// The interceptors some `server-interceptors` slot names, by manifest name.
    interceptors: stages::intercept_chains::Running,
    limits: ServeLimits,
    manifest: Option<Arc<axle_manifest::Manifest>>,
    /// The application's readiness hook (see [`ServerBuilder::readiness`]).
    ready: Option<Readiness>,
    /// Serve TLS with this (plain TCP when `None`).
    tls: Option<ServerTls>,
}

/// Resolves when the application is ready to take traffic (`Err`: it never will be).
pub type Readiness = BoxFuture<'static, Result<(), String>>;

impl ServerBuilder {
    pub fn new() -> Self {
        ServerBuilder::default()
    }

    /// Registers a raw handler for `service/method`.
    pub fn method(mut self, service: &str, method: &str, handler: Handler) -> Self {
        self.handlers
            .entry(service.to_string())
            .or_default()
            .insert(method.to_string(), handler);
        self
    }

    /// Registers one raw handler for every method of `service`.
    pub fn any_method(mut self, service: &str, handler: Handler) -> Self {
        self.any_method.insert(service.to_string(), handler);
        self
    }

    /// Registers a typed handler: the request is decoded by the serializer plugin of its
    /// content type, the answer encoded by the same.
    pub fn typed<Req, Resp, F, Fut>(self, service: &str, method: &str, f: F) -> Self
    where
        Req: serde::de::DeserializeOwned + Send + 'static,
        Resp: serde::Serialize + Send + 'static,
        F: Fn(Req, Context) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Resp, Status>> + Send + 'static,
    {
        let serializers = Arc::new(self.serializers.clone());
        let handler = handler::typed(serializers, f);
        self.method(service, method, handler)
    }

    /// The limiter plugin (none: admit everything).
    pub fn limiter(mut self, limiter: Option<Arc<LimiterPlugin>>) -> Self {
        self.limiter = limiter;
        self
    }

    /// A serializer typed handlers may decode with (by its content type). Register
    /// serializers before typed handlers.
    pub fn serializer(mut self, serializer: Arc<SerializerPlugin>) -> Self {
        self.serializers
            .insert(serializer.content_type().to_string(), serializer);
        self
    }

    /// Serves TLS (and, when it names a client CA, requires client certificates).
    pub fn tls(mut self, tls: ServerTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The application's readiness hook: registration in discovery waits for it (delayed
    /// exposure — start inside-out: plugins loaded, caches warm, then callers find us).
    /// Without one the server is ready once bound.
    pub fn readiness(
        mut self,
        ready: impl std::future::Future<Output = Result<(), String>> + Send + 'static,
    ) -> Self {
        self.ready = Some(Box::pin(ready));
        self
    }

    /// Frame limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits.frame = limits;
        self
    }

    /// Connection limits: how many, how idle, how slow a frame, how much in flight on
    /// each (`[serve]` in the manifest sets them through [`ServerBuilder::with_manifest`]).
    pub fn serve_limits(mut self, limits: ServeLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The manifest's provider side: `[tls]` and `[trust]`, compression, its default
    /// limiter slot and every serializer it names (typed handlers decode with whichever
    /// the request used).
    /// Register typed handlers after this.
    pub fn with_manifest(
        mut self,
        host: &axle_plugin_host::PluginHost,
        manifest: &axle_manifest::Manifest,
    ) -> anyhow::Result<Self> {
        use axle_manifest::PluginKind;
        use axle_plugin_host::Plugin;
        self.manifest = Some(Arc::new(manifest.clone()));
        let frame = self.limits.frame;
        self.limits = manifest.serve.limits;
        self.limits.frame = frame;
        self.limits.frame.compression = manifest.compression();
        if let Some(files) = &manifest.tls.server {
            self.tls = Some(ServerTls::load(files)?);
        }
        let chained = stages::intercept_chains::named(manifest);
        for spec in manifest.plugins.values() {
            let wanted = spec.kind == PluginKind::Serializer
                || manifest.slots.limiter.as_deref() == Some(spec.name.as_str())
                || chained.contains(spec.name.as_str());
            if !wanted {
                continue;
            }
            let loaded = host.load(spec)?;
            match loaded.plugin {
                Plugin::Serializer(s) => self = self.serializer(s),
                Plugin::Limiter(l) => {
                    self.limiter = Some(l);
                    self.limiter_spec = Some((spec.clone(), loaded.report.digest));
                }
                Plugin::Interceptor(i) => {
                    let entry = (spec.clone(), loaded.report.digest, i);
                    self.interceptors.insert(spec.name.clone(), entry);
                }
                _ => {}
            }
        }
        self.shadow_limiter.fill(host, manifest, false)?;
        Ok(self)
    }

    /// Binds and starts accepting.
    pub async fn bind(self, addr: &str) -> std::io::Result<Server> {
        let listener = listen(addr).await?;
        let local = listener.local_addr()?;
        Ok(self.serve(listener, local))
    }

    /// Serves the connections another accept loop hands over (it owns the listener at
    /// `local`: the admin endpoint, which keeps the HTTP ones for itself).
    pub fn serve_handed(
        self,
        incoming: tokio::sync::mpsc::Receiver<(tokio::net::TcpStream, SocketAddr)>,
        local: SocketAddr,
    ) -> Server {
        self.serve(incoming, local)
    }

    fn serve(self, incoming: impl serve::Incoming, local: SocketAddr) -> Server {
        let (closing_tx, closing_rx) = watch::channel(false);
        let mut services: Vec<String> = self
            .handlers
            .keys()
            .chain(self.any_method.keys())
            .cloned()
            .collect();
        services.sort();
        services.dedup();
        let guards = stages::protect::Guards::new(
            self.manifest.as_deref(),
            self.handlers
                .iter()
                .flat_map(|(s, methods)| methods.keys().map(move |m| (s.as_str(), m.as_str()))),
            self.any_method.keys().map(String::as_str),
        );
        let interceptors = stages::intercept_chains::Chains::build(
            self.manifest.as_deref(),
            self.interceptors,
            &services,
        );
        let pipeline = Arc::new(Pipeline {
            intercepting: AtomicBool::new(!interceptors.is_empty()),
            interceptors: arc_swap::ArcSwap::from_pointee(interceptors),
            handlers: self.handlers,
            any_method: self.any_method,
            limiter: arc_swap::ArcSwapOption::new(self.limiter),
            limiter_spec: std::sync::Mutex::new(self.limiter_spec),
            shadow_limiter: self.shadow_limiter,
            serializers: {
                let mut by_type: Vec<_> = self.serializers.into_values().collect();
                by_type.sort_by(|a, b| a.content_type().cmp(b.content_type()));
                by_type
            },
            guards,
            trust: self
                .manifest
                .as_ref()
                .map(|m| m.trust.clone())
                .unwrap_or_default(),
            closing: AtomicBool::new(false),
            last_refused_ns: std::sync::atomic::AtomicU64::new(0),
            in_flight: Arc::new(AtomicUsize::new(0)),
            refused_closing: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            connections: Connections::new(),
            local,
        });
        let (stop_tx, stop_rx) = watch::channel(false);
        let connections = pipeline.connections.clone();
        let accept = tokio::spawn(serve::accept_until(
            incoming,
            pipeline.clone(),
            self.limits,
            self.tls,
            connections.clone(),
            closing_rx,
            stop_rx,
        ));
        Server {
            local,
            closing: closing_tx,
            stop_accepting: stop_tx,
            pipeline,
            accept,
            services,
            ready: self.ready,
            on_closing: Vec::new(),
        }
    }
}

/// Connections the kernel may hold for the accept loop (tokio's default is 1,024): a
/// burst of new callers larger than the queue has its handshakes dropped and retried a
/// second later. The kernel caps it at `net.core.somaxconn`.
const ACCEPT_BACKLOG: u32 = 4096;

/// Binds `addr` (the first address it resolves to) with [`ACCEPT_BACKLOG`].
async fn listen(addr: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let socket = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(a).and_then(|()| socket.listen(ACCEPT_BACKLOG)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("`{addr}` resolves to no address"),
        )
    }))
}

/// A running server.
pub struct Server {
    local: SocketAddr,
    closing: watch::Sender<bool>,
    /// Stops the accept loop (at the end of the drain, see [`Server::shutdown`]).
    stop_accepting: watch::Sender<bool>,
    pipeline: Arc<Pipeline>,
    accept: tokio::task::JoinHandle<()>,
    services: Vec<String>,
    ready: Option<Readiness>,
    /// Work to finish once closing has begun, before the drain (the facade's exposure
    /// deregisters from discovery here; the server knows nothing of registries).
    on_closing: Vec<BoxFuture<'static, ()>>,
}

impl Server {
    /// The services this server hosts, sorted.
    pub fn services(&self) -> &[String] {
        &self.services
    }

    /// Waits for the readiness hook, at most `timeout` (at once if there is none, or it
    /// already resolved). `Err` says why the application will not be ready.
    pub async fn ready(&mut self, timeout: Duration) -> Result<(), String> {
        let Some(ready) = self.ready.take() else {
            return Ok(());
        };
        match tokio::time::timeout(timeout, ready).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "the readiness hook did not answer within {timeout:?}"
            )),
        }
    }

    /// Adds work that [`Server::shutdown`] runs once new requests are refused and callers
    /// told, before it drains (deregistration: consumers stop sending while in-flight
    /// requests finish).
    pub fn on_closing(&mut self, work: BoxFuture<'static, ()>) {
        self.on_closing.push(work);
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The handle hot-swap uses to replace this server's limiter.
    pub fn limiter_slot(&self) -> LimiterSlot {
        LimiterSlot(self.pipeline.clone())
    }

    /// Requests being handled right now.
    pub fn in_flight(&self) -> usize {
        self.pipeline.in_flight.load(Ordering::Relaxed)
    }

    /// Every method's counters now (the provider's side of `axle stats`).
    pub fn stats(&self) -> ServerView {
        self.pipeline.view()
    }

    /// A handle that reads [`Server::stats`] from elsewhere (the admin endpoint) and
    /// outlives nothing: the server still stops with [`Server::shutdown`].
    pub fn observer(&self) -> ServerObserver {
        ServerObserver(self.pipeline.clone())
    }

    /// Stops outside-in: mark closing (new requests answer `shutting_down`, which callers
    /// fail over from safely: the handler never ran), tell connected callers (goaway; a
    /// connection made from now on gets one at once), run the closing work
    /// ([`Server::on_closing`]: deregistration), wait up
    /// to `drain` for the requests in flight and for callers to stop sending, then stop
    /// accepting.
    pub async fn shutdown(mut self, drain: Duration) {
        self.pipeline.closing.store(true, Ordering::Relaxed);
        let _ = self.closing.send(true);
        let closed_ns = axle_core::now_ns();
        // The closing work (deregistration) has its own bound: a slow registry does not
        // eat the drain, which starts when it is done.
        let work = futures::future::join_all(std::mem::take(&mut self.on_closing));
        if tokio::time::timeout(axle_manifest::defaults::CLOSING_WORK_TIMEOUT, work)
            .await
            .is_err()
        {
            tracing::warn!(
                "closing work (deregistration) did not finish within {:?}; draining anyway",
                axle_manifest::defaults::CLOSING_WORK_TIMEOUT
            );
        }
        let deadline = tokio::time::Instant::now() + drain;
        // Requests a caller sent before it read the goaway are still on the wire: they
        // must get their `shutting_down` answer (which callers fail over from) rather than
        // a reset when the process exits. So the drain also waits until no request has
        // arrived for a quiet period, within the same deadline.
        let quiet = axle_manifest::defaults::DRAIN_QUIET.as_nanos() as u64;
        loop {
            let last = closed_ns.max(self.pipeline.last_refused_ns.load(Ordering::Relaxed));
            let settled = axle_core::now_ns().saturating_sub(last) >= quiet;
            if (self.in_flight() == 0 && settled) || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = self.stop_accepting.send(true);
        self.accept.abort();
        // Answers are written before the process may exit: each connection closes once
        // it has nothing in flight and its writer has sent what was queued.
        let left = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .max(axle_manifest::defaults::DRAIN_QUIET);
        if !self.pipeline.connections.wait_closed(left).await {
            tracing::warn!(
                open = self.pipeline.connections.open(),
                "connections still open at the end of the drain"
            );
        }
    }
}

/// Reads a running server's counters; cheap to clone.
#[derive(Clone)]
pub struct ServerObserver(Arc<Pipeline>);

impl ServerObserver {
    /// Every method's counters now.
    pub fn stats(&self) -> ServerView {
        self.0.view()
    }

    /// The counters of the plugins in this server's path: its limiter and serializers.
    pub fn plugins(&self) -> Vec<axle_plugin_host::PluginCounters> {
        let limiter = self
            .0
            .limiter
            .load()
            .iter()
            .map(|l| l.counters())
            .collect::<Vec<_>>();
        let serializers = self.0.serializers.iter().map(|s| s.counters());
        let chains = self.0.interceptors.load();
        let interceptors = chains.plugins().map(|i| i.counters());
        limiter
            .into_iter()
            .chain(self.0.shadow_limiter.plugin_counters())
            .chain(serializers)
            .chain(interceptors)
            .collect()
    }

    /// What the shadow limiter would have decided (`docs/shadow.md`); empty without one.
    pub fn shadows(&self) -> Vec<axle_plugin_host::shadow::ShadowView> {
        self.0.shadow_limiter.view().into_iter().collect()
    }

    /// Where the server listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.0.local
    }

    /// Whether it has begun stopping (new requests answer `shutting_down`): not ready.
    pub fn is_closing(&self) -> bool {
        self.0.closing.load(Ordering::Relaxed)
    }
}

/// The server pipeline (implements the transport's [`Dispatch`]).
pub struct Pipeline {
    handlers: FxHashMap<String, FxHashMap<String, Handler>>,
    any_method: FxHashMap<String, Handler>,
    /// Swapped whole by hot-swap; a request uses the one it loaded.
    limiter: arc_swap::ArcSwapOption<LimiterPlugin>,
    limiter_spec: std::sync::Mutex<Option<(axle_manifest::PluginSpec, [u8; 32])>>,
    /// A limiter asked beside the live one on sampled requests (`stages/shadow_limit.rs`).
    shadow_limiter: stages::shadow_limit::Slot,
    /// The serializers typed handlers decode with (for their counters).
    serializers: Vec<Arc<SerializerPlugin>>,
    /// Per-method governance: internal-only, concurrency guard, fuse (fixed at bind: one
    /// entry per declared method, one per service a catch-all serves, one for the rest).
    guards: stages::protect::Guards,
    /// Which peers are internal (`[trust]`; nobody without a manifest).
    trust: axle_manifest::TrustSpec,
    /// The `server-interceptors` chains (swapped whole); whether any service has one.
    interceptors: arc_swap::ArcSwap<stages::intercept_chains::Chains>,
    intercepting: AtomicBool,
    /// Set when the server starts stopping (read per request: an atomic, not the watch).
    closing: AtomicBool,
    /// When the last request was refused with `shutting_down` (`facts::now_ns`): the drain
    /// waits for these to stop arriving.
    last_refused_ns: std::sync::atomic::AtomicU64,
    /// Requests being handled.
    in_flight: Arc<AtomicUsize>,
    /// Refused while stopping, and naming no service or method (no method to count them on).
    refused_closing: AtomicU64,
    malformed: AtomicU64,
    /// Open connections (the cap, and what the stop waits on to know answers went out).
    connections: Arc<Connections>,
    local: SocketAddr,
}

impl Pipeline {
    /// The handler of `service/method` (its own, else its service's catch-all). Borrowed,
    /// not cloned: a clone and its drop are two locked operations per request on the
    /// handler's reference count, a line every core's requests would write.
    fn handler(&self, service: &str, method: &str) -> Option<&Handler> {
        self.handlers
            .get(service)
            .and_then(|methods| methods.get(method))
            .or_else(|| self.any_method.get(service))
    }

    fn view(&self) -> ServerView {
        ServerView {
            address: self.local.to_string(),
            in_flight: self.in_flight.load(Ordering::Relaxed) as u64,
            refused_closing: self.refused_closing.load(Ordering::Relaxed),
            malformed: self.malformed.load(Ordering::Relaxed),
            connections: self.connections.open() as u64,
            connections_refused: self.connections.refused_and_evicted().0,
            connections_evicted: self.connections.refused_and_evicted().1,
            methods: self.guards.views(),
        }
    }
}

impl Dispatch for Pipeline {
    fn dispatch(
        self: Arc<Self>,
        request: Frame,
        peer: &Arc<Peer>,
        arrived: std::time::Instant,
    ) -> BoxFuture<'static, Frame> {
        Box::pin(pipeline::run(self, request, peer.clone(), arrived))
    }

    fn keeps_running(&self, request: &Frame) -> bool {
        if !self.guards.any_keeps_running {
            return false;
        }
        let (Some(service), Some(method)) = (&request.meta.service, &request.meta.method) else {
            return false;
        };
        let served = self.handler(service, method).is_some();
        !self.guards.of(service, method, served).cancel_on_disconnect
    }
}
