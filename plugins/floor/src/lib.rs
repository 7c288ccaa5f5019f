//! The cheapest component call there is: a scalar in, a scalar out, no work. `axle bench
//! plugins` measures it in the same run as every plugin, so plugin costs read as ratios
//! to the component calling convention itself.

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({ path: "wit", world: "floor" });

    struct Floor;

    impl Guest for Floor {
        fn noop(x: u64) -> u64 {
            x.wrapping_add(1)
        }

        fn echo(bytes: Vec<u8>) -> Vec<u8> {
            bytes
        }
    }

    export!(Floor);
}
