//! `memgate-operator`: prints the CRDs and validates memgate YAML offline.
//!
//! Reconciliation arrives with the operator issue; the subcommands here already share every rule
//! with it through `memgate-crds`.

mod offline;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The memgate operator.
#[derive(Parser)]
#[command(name = "memgate-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print both CustomResourceDefinitions as YAML.
    Crds,
    /// Validate DialectPresets and MemoryProviders in files or folders, offline.
    ///
    /// Exit status: 0 all valid, 1 any invalid, 2 unreadable or unparsable input.
    Validate {
        /// YAML files or folders (searched recursively for *.yaml and *.yml).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Crds => match memgate_crds::crd::render_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("error: rendering the CRDs failed: {err}");
                ExitCode::from(2)
            }
        },
        Command::Validate { paths } => {
            let report = offline::validate_paths(&paths);
            for line in &report.lines {
                println!("{line}");
            }
            eprintln!("{}", report.summary());
            ExitCode::from(report.exit_code())
        }
    }
}
