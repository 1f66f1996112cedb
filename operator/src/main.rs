//! `memgate-operator`: prints the CRDs and validates memgate YAML offline.
//!
//! Reconciliation arrives with the operator issue; the subcommands here already share every rule
//! with it through `memgate-crds`.

mod offline;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use memgate_crds::source_file::{DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_TOTAL_BYTES, ReadLimits};

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
        /// YAML files or folders (searched recursively for *.yaml and *.yml; only regular files are read).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Most bytes read from one file; a larger file is unreadable input (exit 2).
        #[arg(long, default_value_t = DEFAULT_MAX_FILE_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
        max_file_bytes: u64,
        /// Most bytes read from all files together; past it the run stops as unreadable input (exit 2).
        #[arg(long, default_value_t = DEFAULT_MAX_TOTAL_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
        max_total_bytes: u64,
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
        Command::Validate { paths, max_file_bytes, max_total_bytes } => {
            let limits = ReadLimits { max_file_bytes, max_total_bytes };
            let report = offline::validate_paths(&paths, limits);
            for line in &report.lines {
                println!("{line}");
            }
            eprintln!("{}", report.summary());
            ExitCode::from(report.exit_code())
        }
    }
}
