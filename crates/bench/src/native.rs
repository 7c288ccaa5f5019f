//! Native twins of the shipped plugins: the very same strategy code (the plugin crates,
//! compiled for the host through `axle-sdk`'s runtimes), so `axle bench plugins` reports
//! what the wasm boundary costs as a ratio, not a guess.

use axle_sdk::{
    Config, ConfigValue, HealthScorer, LimitKey, Limiter, LimiterRuntime, RouterRuntime, Selector,
    SelectorRuntime, Serializer, Value, WindowStats,
};

/// A selector run natively.
pub trait NativeSelector {
    fn endpoints_changed(&mut self, table: axle_sdk::EndpointTable);
    fn define_set(&mut self, id: u32, members: Vec<u32>);
    fn select(&mut self, id: u32, hash_key: u64) -> Option<u32>;
}

impl<T: Selector> NativeSelector for SelectorRuntime<T> {
    fn endpoints_changed(&mut self, table: axle_sdk::EndpointTable) {
        SelectorRuntime::endpoints_changed(self, table)
    }
    fn define_set(&mut self, id: u32, members: Vec<u32>) {
        SelectorRuntime::define_set(self, id, members)
    }
    fn select(&mut self, id: u32, hash_key: u64) -> Option<u32> {
        SelectorRuntime::select(self, id, hash_key)
    }
}

/// The native twin of builtin selector `name`.
pub fn selector(name: &str, config: &Config) -> Option<Box<dyn NativeSelector>> {
    fn boxed<T: Selector>(c: &Config) -> Option<Box<dyn NativeSelector>> {
        SelectorRuntime::<T>::new(c)
            .ok()
            .map(|r| Box::new(r) as Box<dyn NativeSelector>)
    }
    match name {
        "smooth-weighted" => boxed::<axle_plugin_smooth_weighted::SmoothWeighted>(config),
        "zone-aware" => boxed::<axle_plugin_zone_aware::ZoneAware>(config),
        "round-robin" => boxed::<axle_plugin_round_robin::RoundRobin>(config),
        "random" => boxed::<axle_plugin_random::Random>(config),
        "weighted-random" => boxed::<axle_plugin_weighted_random::WeightedRandom>(config),
        "least-active" => boxed::<axle_plugin_least_active::LeastActive>(config),
        "p2c-ewma" => boxed::<axle_plugin_p2c_ewma::P2cEwma>(config),
        "consistent-hash" => boxed::<axle_plugin_consistent_hash::ConsistentHash>(config),
        "shortest-response" => boxed::<axle_plugin_shortest_response::ShortestResponse>(config),
        _ => None,
    }
}

/// A router run natively.
pub trait NativeRouter {
    fn endpoints_changed(&mut self, table: axle_sdk::EndpointTable);
    fn route(&mut self, candidates: &[u32], request: &axle_sdk::RouteRequest) -> Vec<u32>;
}

impl<T: axle_sdk::Router> NativeRouter for RouterRuntime<T> {
    fn endpoints_changed(&mut self, table: axle_sdk::EndpointTable) {
        RouterRuntime::endpoints_changed(self, table)
    }
    fn route(&mut self, candidates: &[u32], request: &axle_sdk::RouteRequest) -> Vec<u32> {
        RouterRuntime::route(self, candidates, request)
    }
}

/// The native twin of builtin router `name`.
pub fn router(name: &str, config: &Config) -> Option<Box<dyn NativeRouter>> {
    fn boxed<T: axle_sdk::Router>(c: &Config) -> Option<Box<dyn NativeRouter>> {
        RouterRuntime::<T>::new(c)
            .ok()
            .map(|r| Box::new(r) as Box<dyn NativeRouter>)
    }
    match name {
        "tag" => boxed::<axle_plugin_tag::TagRouter>(config),
        "condition" => boxed::<axle_plugin_condition::ConditionRouter>(config),
        _ => None,
    }
}

/// A serializer run natively.
pub trait NativeSerializer {
    fn encode(&mut self, value: &Value) -> Result<Vec<u8>, String>;
    fn decode(&mut self, bytes: &[u8]) -> Result<Value, String>;
}

impl<T: Serializer> NativeSerializer for T {
    fn encode(&mut self, value: &Value) -> Result<Vec<u8>, String> {
        Serializer::encode(self, value)
    }
    fn decode(&mut self, bytes: &[u8]) -> Result<Value, String> {
        Serializer::decode(self, bytes)
    }
}

/// The native twin of builtin serializer `name`.
pub fn serializer(name: &str, config: &Config) -> Option<Box<dyn NativeSerializer>> {
    match name {
        "json" => axle_plugin_json::JsonSerializer::new(config)
            .ok()
            .map(|s| Box::new(s) as Box<dyn NativeSerializer>),
        "msgpack" => axle_plugin_msgpack::MsgpackSerializer::new(config)
            .ok()
            .map(|s| Box::new(s) as Box<dyn NativeSerializer>),
        _ => None,
    }
}

/// The native twin of builtin health scorer `name`.
pub fn health_scorer(
    name: &str,
    config: &Config,
) -> Option<axle_plugin_availability::Availability> {
    match name {
        "availability" => axle_plugin_availability::Availability::new(config).ok(),
        _ => None,
    }
}

/// Scores natively (for the twin's timing loop).
pub fn score(s: &mut axle_plugin_availability::Availability, stats: &WindowStats) -> u32 {
    s.score(stats).weight_permille
}

/// What a limiter twin says of itself: the limiter world its component is built for.
#[derive(Clone, Copy)]
// Every shipped limiter world includes `stateful-limiter`, so every twin hands its state
// over in a hot swap, as its component does (checked in `tests/native_twins.rs`).
enum LimiterWorld {
    /// `stateful-limiter` alone.
    Stateful,
    /// `concurrency-limiter`: hears `release`.
    Concurrency,
    /// `cluster-limiter`: hears provider counts.
    Cluster,
    /// `leasing-limiter`: answers `acquire-lease`.
    Leasing,
}

/// A shipped limiter as the plugin host's native twin, and `axle bench plugins`' timing
/// loop's: the SDK runtime the component wraps, called directly.
struct HostLimiter<T: Limiter> {
    runtime: LimiterRuntime<T>,
    world: LimiterWorld,
}

impl<T: Limiter> axle::plugin::native::NativeLimiter for HostLimiter<T>
where
    LimiterRuntime<T>: Send,
{
    fn key_defined(&mut self, id: u32, key: LimitKey) {
        self.runtime.key_defined(id, key)
    }
    fn acquire(&mut self, key: u32, permits: u32, now_ns: u64) -> axle_sdk::Admission {
        self.runtime.acquire_at(key, permits, now_ns)
    }
    fn wants_release(&self) -> bool {
        matches!(self.world, LimiterWorld::Concurrency)
    }
    fn release(&mut self, key: u32, permits: u32, latency_ns: u64, dropped: bool) {
        self.runtime.release(key, permits, latency_ns, dropped)
    }
    fn wants_providers(&self) -> bool {
        matches!(self.world, LimiterWorld::Cluster)
    }
    fn wants_leases(&self) -> bool {
        matches!(self.world, LimiterWorld::Leasing)
    }
    fn acquire_lease(&mut self, key: u32, now_ns: u64) -> (axle_sdk::Admission, u32) {
        self.runtime.acquire_lease(key, now_ns)
    }
    fn providers_changed(&mut self, service: &str, providers: u32) {
        self.runtime.providers_changed(service, providers)
    }
    fn export_state(&self) -> Option<Vec<u8>> {
        Some(self.runtime.export_state())
    }
    fn import_state(&mut self, state: &[u8]) -> bool {
        self.runtime.import_state(state);
        true
    }
}

/// How to make the twin of builtin limiter `name`, if it has one.
fn limiter_maker(name: &str) -> Option<axle::plugin::native::MakeLimiter> {
    use axle::plugin::native::{MakeLimiter, NativeLimiter};
    fn make<T: Limiter>(world: LimiterWorld) -> MakeLimiter
    where
        LimiterRuntime<T>: Send,
    {
        std::sync::Arc::new(move |flat: &[(String, ConfigValue)]| {
            let runtime = LimiterRuntime::<T>::new(&config(flat.to_vec()))?;
            Ok(Box::new(HostLimiter { runtime, world }) as Box<dyn NativeLimiter>)
        })
    }
    use LimiterWorld::*;
    Some(match name {
        "token-bucket" => make::<axle_plugin_token_bucket::TokenBucket>(Leasing),
        "sliding-window" => make::<axle_plugin_sliding_window::SlidingWindow>(Stateful),
        "adaptive-concurrency" => {
            make::<axle_plugin_adaptive_concurrency::AdaptiveConcurrency>(Concurrency)
        }
        "cluster-rate" => make::<axle_plugin_cluster_rate::ClusterRate>(Cluster),
        _ => return None,
    })
}

/// The shipped limiters with a twin, by builtin name.
const LIMITERS: [&str; 4] = [
    "token-bucket",
    "sliding-window",
    "adaptive-concurrency",
    "cluster-rate",
];

/// The native twin of builtin limiter `name`, with key 0 defined.
pub fn limiter(
    name: &str,
    config: &Config,
) -> Option<Box<dyn axle::plugin::native::NativeLimiter>> {
    let mut twin = limiter_maker(name)?(&config.entries).ok()?;
    twin.key_defined(0, LimitKey::default());
    Some(twin)
}

/// The native twin of builtin interceptor `name`: its `intercept`, called directly.
pub type NativeInterceptor = Box<dyn FnMut(&axle_sdk::InterceptCall) -> axle_sdk::InterceptVerdict>;

/// The native twin of builtin interceptor `name`.
pub fn interceptor(name: &str, config: &Config) -> Option<NativeInterceptor> {
    fn boxed<T: axle_sdk::Interceptor>(c: &Config) -> Option<NativeInterceptor> {
        let mut plugin = T::new(c).ok()?;
        Some(Box::new(move |call| plugin.intercept(call)))
    }
    match name {
        "allow-apps" => boxed::<axle_plugin_allow_apps::AllowApps>(config),
        "tag-map" => boxed::<axle_plugin_tag_map::TagMap>(config),
        _ => None,
    }
}

/// A plugin's config list as the SDK's config.
pub fn config(flat: Vec<(String, ConfigValue)>) -> Config {
    Config { entries: flat }
}

/// A shipped selector as the plugin host's native twin (`axle bench rpc`'s
/// `axle-native` row): the SDK runtime the component wraps, called directly.
/// The runtime, and whether its component answers runs (the `run-selector` world).
struct HostTwin<T: Selector>(SelectorRuntime<T>, bool);

impl<T: Selector + Send> axle::plugin::native::NativeSelector for HostTwin<T>
where
    SelectorRuntime<T>: Send,
{
    fn endpoints_changed(&mut self, table: axle_sdk::EndpointTable) {
        self.0.endpoints_changed(table)
    }
    fn define_set(&mut self, id: u32, members: Vec<u32>) {
        self.0.define_set(id, members)
    }
    fn select(&mut self, id: u32, hash_key: u64) -> Option<u32> {
        self.0.select(id, hash_key)
    }
    // No `feedback`: like their components (built without the SDK's `learning-selector`
    // feature), the shipped selectors hear no outcomes.
    fn measure(&self) -> Option<axle_sdk::LoadMeasure> {
        self.0.measure()
    }
    fn select_two(&mut self, id: u32, hash_key: u64) -> u64 {
        self.0.select_two(id, hash_key)
    }
    fn wants_runs(&self) -> bool {
        self.1
    }
    fn select_run(&mut self, id: u32) -> u64 {
        self.0.select_run(id)
    }
    fn select_two_run(&mut self, id: u32) -> u64 {
        self.0.select_two_run(id)
    }
}

/// The twins a plugin host runs in place of the shipped selectors' and limiters'
/// components.
pub fn host_natives() -> axle::plugin::native::Natives {
    use axle::plugin::native::{MakeSelector, NativeSelector};
    fn twin<T: Selector + Send + 'static>(runs: bool) -> MakeSelector
    where
        SelectorRuntime<T>: Send,
    {
        std::sync::Arc::new(move |flat: &[(String, ConfigValue)]| {
            let runtime = SelectorRuntime::<T>::new(&config(flat.to_vec()))?;
            Ok(Box::new(HostTwin(runtime, runs)) as Box<dyn NativeSelector>)
        })
    }
    // As their components are built (`crates/builtins/build.rs`): four in the
    // `run-selector` world and three in `two-choice-run-selector` (runs of pairs), the
    // others neither.
    fn make<T: Selector + Send + 'static>() -> MakeSelector
    where
        SelectorRuntime<T>: Send,
    {
        twin::<T>(false)
    }
    fn runs<T: Selector + Send + 'static>() -> MakeSelector
    where
        SelectorRuntime<T>: Send,
    {
        twin::<T>(true)
    }
    let natives = axle::plugin::native::Natives::default()
        .selector(
            "smooth-weighted",
            runs::<axle_plugin_smooth_weighted::SmoothWeighted>(),
        )
        .selector("zone-aware", make::<axle_plugin_zone_aware::ZoneAware>())
        .selector("round-robin", runs::<axle_plugin_round_robin::RoundRobin>())
        .selector("random", runs::<axle_plugin_random::Random>())
        .selector(
            "weighted-random",
            runs::<axle_plugin_weighted_random::WeightedRandom>(),
        )
        .selector(
            "least-active",
            runs::<axle_plugin_least_active::LeastActive>(),
        )
        .selector("p2c-ewma", runs::<axle_plugin_p2c_ewma::P2cEwma>())
        .selector(
            "consistent-hash",
            make::<axle_plugin_consistent_hash::ConsistentHash>(),
        )
        .selector(
            "shortest-response",
            runs::<axle_plugin_shortest_response::ShortestResponse>(),
        );
    LIMITERS.iter().fold(natives, |natives, name| {
        let make = limiter_maker(name).expect("every name in LIMITERS has a twin");
        natives.limiter(name, make)
    })
}
