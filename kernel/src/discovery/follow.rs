//! A consumer following discovery: snapshots of its groups become the client's endpoint
//! table (built on `Client::set_endpoints`).
