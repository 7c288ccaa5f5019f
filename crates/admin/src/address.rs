//! Where the admin endpoint may listen: loopback only, unless its operator exposes it on
//! purpose. It has no authentication; the host's own users are the audience.

use std::net::SocketAddr;

use super::AdminError;

/// Whether the admin endpoint may listen beyond loopback.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Exposure {
    /// Refuse any address that is not loopback (the default).
    #[default]
    LoopbackOnly,
    /// Listen wherever asked (`--admin-public`).
    Public,
}

/// Resolves `addr` and returns the address to bind; with [`Exposure::LoopbackOnly`],
/// every address the name resolves to must be loopback (a name that also resolves
/// elsewhere is refused rather than guessed at).
pub async fn resolve(addr: &str, exposure: Exposure) -> Result<SocketAddr, AdminError> {
    let all: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| AdminError::Resolve {
            addr: addr.to_string(),
            reason: e.to_string(),
        })?
        .collect();
    let Some(first) = all.first().copied() else {
        return Err(AdminError::Resolve {
            addr: addr.to_string(),
            reason: "no address".into(),
        });
    };
    if exposure == Exposure::LoopbackOnly {
        if let Some(outside) = all.iter().find(|a| !a.ip().is_loopback()) {
            return Err(AdminError::NotLoopback {
                addr: addr.to_string(),
                ip: outside.ip(),
            });
        }
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn loopback_passes_anything_else_needs_exposure() {
        for ok in ["127.0.0.1:0", "[::1]:7301", "127.8.9.10:1"] {
            let a = resolve(ok, Exposure::LoopbackOnly).await.unwrap();
            assert!(a.ip().is_loopback(), "{ok}");
        }
        for outside in ["0.0.0.0:7301", "[::]:7301", "10.1.2.3:7301"] {
            let err = resolve(outside, Exposure::LoopbackOnly).await.unwrap_err();
            assert!(matches!(err, AdminError::NotLoopback { .. }), "{outside}");
            assert!(err.to_string().contains("--admin-public"), "{err}");
            assert!(
                resolve(outside, Exposure::Public).await.is_ok(),
                "{outside}"
            );
        }
        let err = resolve("not an address", Exposure::Public)
            .await
            .unwrap_err();
        assert!(matches!(err, AdminError::Resolve { .. }), "{err}");
    }
}
