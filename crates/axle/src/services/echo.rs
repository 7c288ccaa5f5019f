//! `echo`: every method answers its input, in its content type.

use std::sync::Arc;

use axle_server::{Response, ServerBuilder};

pub fn register(builder: ServerBuilder) -> ServerBuilder {
    builder.any_method(
        "echo",
        Arc::new(|req| {
            Box::pin(async move {
                Ok(Response {
                    payload: req.payload,
                    content_type: req.content_type,
                })
            })
        }),
    )
}
