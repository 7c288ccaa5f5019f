use crate::kinds::router::{Router, RouterRuntime};

world_bindings!(
    "axle:spi/router",
    "__axle_export_router",
    "axle_sdk::wasm::router::bindings"
);

use crate::wasm::base::axle::spi::types as wit;
use bindings::axle::spi::routing;

pub trait Slot {
    type Plugin: Router;
    fn with<R>(f: impl FnOnce(&mut Option<RouterRuntime<Self::Plugin>>) -> R) -> R;
}

impl<S: Slot> bindings::Guest for S {
    fn init(config: wit::Config) -> Result<(), String> {
        crate::wasm::install_panic_hook();
        let runtime = RouterRuntime::new(&crate::wasm::config(config))?;
        S::with(|slot| *slot = Some(runtime));
        Ok(())
    }

    fn declare() -> routing::RouteReads {
        let reads = S::with(|slot| slot.as_ref().map(|rt| rt.declare())).unwrap_or_default();
        routing::RouteReads {
            tags: match reads.tags {
                crate::TagReads::None => routing::TagReads::None,
                crate::TagReads::Keys(keys) => routing::TagReads::Keys(keys),
                crate::TagReads::All => routing::TagReads::All,
            },
            consumer_app: reads.consumer_app,
            caller_address: reads.caller_address,
            method: reads.method,
            fields: reads.fields,
        }
    }

    fn endpoints_changed(table: wit::EndpointTable) {
        let table = crate::wasm::table(table);
        S::with(|slot| {
            if let Some(rt) = slot {
                rt.endpoints_changed(table)
            }
        })
    }

    fn route(candidates: Vec<u32>, request: routing::Request) -> Vec<u32> {
        let request = crate::RouteRequest {
            service: request.service,
            method: request.method,
            tags: request.tags,
            consumer_app: request.consumer_app,
            caller_address: request.caller_address,
            fields: request.fields,
        };
        S::with(|slot| match slot {
            Some(rt) => rt.route(&candidates, &request),
            None => candidates.clone(),
        })
    }
}
