//! The `--admin [ADDR]` flags of the commands that run a kernel (`serve`, `demo`), and
//! starting the endpoint they ask for (frames and HTTP on one port,
//! `docs/observability.md`).

use std::path::PathBuf;

use axle::admin::{Admin, AdminServer, Exposure, Token, DEFAULT_ADDR};

/// `--admin [ADDR]` and `--admin-public`.
#[derive(clap::Args)]
pub struct AdminArgs {
    /// Serve the admin endpoint (`axle stats --admin ADDR` reads it) on ADDR, default
    /// 127.0.0.1:7301; port 0 picks a free port, printed as `admin on ADDR`.
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = DEFAULT_ADDR
    )]
    pub admin: Option<String>,
    /// Allow the admin endpoint on a non-loopback address. It has no authentication:
    /// anyone who can reach it can read (and, as methods are added, change) this kernel.
    #[arg(long, requires = "admin")]
    pub admin_public: bool,
    /// The bearer token HTTP `POST /swap` must carry, read from this file (else from
    /// $AXLE_ADMIN_TOKEN; with neither, HTTP swaps are refused).
    #[arg(long, value_name = "PATH", requires = "admin")]
    pub admin_token_file: Option<PathBuf>,
}

impl AdminArgs {
    /// Binds `admin` where the flags say, if they ask for it.
    pub async fn start(&self, admin: Admin) -> anyhow::Result<Option<AdminServer>> {
        let Some(addr) = &self.admin else {
            return Ok(None);
        };
        let exposure = if self.admin_public {
            Exposure::Public
        } else {
            Exposure::LoopbackOnly
        };
        let token = Token::configured(self.admin_token_file.as_deref())?;
        Ok(Some(admin.token(token).bind(addr, exposure).await?))
    }
}
