//! `axle swap SLOT PLUGIN [--admin ADDR]`: fills a slot of a running kernel (through its
//! admin endpoint) with another plugin its manifest declares. Prints what was loaded and
//! how long the swap took, or that the slot already ran that plugin; exits 1 with the
//! reason when the running plugin stays (a slot the kernel does not have is refused,
//! naming the ones it has).

use std::process::ExitCode;
use std::time::Duration;

/// `axle swap` flags.
#[derive(clap::Args)]
#[command(
    after_help = "What a kernel can swap: `axle serve --admin` runs a server, whose \
slots are its `limiter` and `server-interceptors`; `axle demo --admin` also runs a \
client, whose slots are `serializer`, `selector`, `routers`, `health-scorer` and \
`client-interceptors` (each also per service: `echo.selector`). Chains take a \
comma-separated list (`\"\"` empties one). A slot the kernel lacks is refused with the \
list of those it has."
)]
pub struct Args {
    /// `selector`, `serializer`, `routers`, `health-scorer`, `client-interceptors` (a
    /// client's, optionally for one service: `echo.selector`), or `limiter`,
    /// `server-interceptors` (a server's).
    slot: String,
    /// The plugin (a `[plugins.<name>]` of the running manifest; for `routers` and the
    /// interceptor chains, a comma-separated list).
    plugin: String,
    /// The running kernel's admin endpoint.
    #[arg(long, default_value = axle::admin::DEFAULT_ADDR)]
    admin: String,
    /// How long to wait for the answer (a plugin that is not cached compiles first).
    #[arg(long, default_value_t = 60_000)]
    timeout_ms: u64,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let body = serde_json::json!({ "slot": args.slot, "plugin": args.plugin });
    match axle::admin::request(
        &args.admin,
        "swap",
        &body,
        Duration::from_millis(args.timeout_ms),
    )
    .await
    {
        Ok(report) => {
            let report: axle::swap::SwapReport = serde_json::from_value(report)?;
            if report.loaded.is_empty() {
                println!(
                    "unchanged: {} already runs {} (kept: {})",
                    args.slot,
                    args.plugin,
                    list(&report.kept)
                );
                return Ok(ExitCode::SUCCESS);
            }
            println!(
                "swapped {} -> {} in {:.2} ms (loaded: {}; kept: {})",
                args.slot,
                args.plugin,
                report.took_us as f64 / 1000.0,
                list(&report.loaded),
                list(&report.kept)
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("axle swap: the running plugin stays: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}
