//! `axle completions SHELL` and `axle man [--dir DIR]`: shell completions and man pages
//! generated from the command's own definition, so they never disagree with `--help`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap_complete::Shell;

/// `axle completions` arguments.
#[derive(clap::Args)]
#[command(
    after_help = "Install, e.g.: axle completions bash > /etc/bash_completion.d/axle; \
axle completions zsh > \"${fpath[1]}/_axle\"; \
axle completions fish > ~/.config/fish/completions/axle.fish"
)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    shell: Shell,
}

/// `axle man` arguments.
#[derive(clap::Args)]
pub struct ManArgs {
    /// Write one page per command (`axle.1`, `axle-serve.1`, ...) into this directory
    /// instead of printing `axle.1` on stdout.
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Prints the completion script for `shell`.
pub fn completions(args: CompletionsArgs, mut command: clap::Command) -> anyhow::Result<ExitCode> {
    // Into a buffer first: clap_complete panics on a closed stdout (`| head`).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "axle", &mut script);
    let _ = std::io::Write::write_all(&mut std::io::stdout(), &script);
    Ok(ExitCode::SUCCESS)
}

/// Prints `axle.1`, or writes every command's page into `--dir`.
pub fn man(args: ManArgs, command: clap::Command) -> anyhow::Result<ExitCode> {
    match args.dir {
        None => {
            clap_mangen::Man::new(command).render(&mut std::io::stdout())?;
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
            // One page per command, named after its path (`axle-config-check.1`).
            clap_mangen::generate_to(command, &dir)
                .map_err(|e| anyhow::anyhow!("cannot write to {}: {e}", dir.display()))?;
            println!("wrote man pages to {}", dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
