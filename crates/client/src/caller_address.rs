//! The caller's address as a router sees it: the local IP this host reaches a service's
//! endpoints from, which is what a provider sees as the peer of the connection (unless a
//! NAT sits between them). Found the way the operating system would route a datagram to
//! the service's first endpoint — a connected UDP socket sends nothing, it only asks the
//! routing table — once per membership change, never per call.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};

use axle_manifest::EndpointSpec;

/// The local IP towards the first of `endpoints` that resolves, as text; `""` when none
/// does (an empty service, or no route: routers then see no address, and a rule on the
/// address does not match).
pub fn towards(endpoints: &[EndpointSpec]) -> String {
    endpoints
        .iter()
        .find_map(|e| local_ip_to(&e.address))
        .map(|ip| ip.to_string())
        .unwrap_or_default()
}

/// The local IP the routing table picks to reach `address` (`host:port`).
fn local_ip_to(address: &str) -> Option<IpAddr> {
    let target: SocketAddr = match address.parse() {
        Ok(addr) => addr,
        // A name resolves here, off the request path (membership changed).
        Err(_) => address.to_socket_addrs().ok()?.next()?,
    };
    let bind: SocketAddr = if target.is_ipv4() {
        "0.0.0.0:0".parse().ok()?
    } else {
        "[::]:0".parse().ok()?
    };
    let socket = UdpSocket::bind(bind).ok()?;
    socket.connect(target).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(address: &str) -> EndpointSpec {
        EndpointSpec::new(address)
    }

    #[test]
    fn a_loopback_provider_sees_a_loopback_caller() {
        assert_eq!(towards(&[spec("127.0.0.1:7300")]), "127.0.0.1");
        assert_eq!(
            towards(&[spec("not an address"), spec("127.0.0.1:1")]),
            "127.0.0.1",
            "the first endpoint that resolves"
        );
        assert_eq!(towards(&[]), "");
    }
}
