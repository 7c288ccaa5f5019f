//! The `--admin [ADDR]` flags of the commands that run a kernel (`serve`, `demo`), and
//! starting the endpoint they ask for.

use axle::admin::{Admin, AdminServer, Exposure, DEFAULT_ADDR};

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
        Ok(Some(admin.bind(addr, exposure).await?))
    }
}
