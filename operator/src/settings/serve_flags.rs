//! `--gateway-serve-flag name=value`: a flag of `memgate-gateway serve` the operator hands to every
//! gateway unchanged, so that a new gateway setting reaches the chart without operator code.
//!
//! Owns the rule of which gateway flags may be passed through and checks each value with the
//! gateway's own parser ([`memgate_gateway::serve_args::ServeArgs`]), so a bad value stops the
//! operator at start naming the flag instead of crash-looping every gateway. Never accepts a flag
//! that carries a credential (those are given by Secret reference) or one the operator renders.

use std::collections::BTreeMap;

use clap::{Args, Command};
use memgate_gateway::serve_args::ServeArgs;

use super::{SettingsError, bad};

const FLAG: &str = "gateway-serve-flag";

/// Gateway flags the operator renders itself (`render/pod.rs`), or that name a file the gateway
/// pod does not have: never passed through. A flag whose environment value is hidden (it may hold
/// a credential, e.g. `--ledger`) is refused as well, by [`ServeFlags::parse`].
pub const NOT_PASSED_THROUGH: [(&str, &str); 14] = [
    ("config", "the operator mounts the config"),
    ("listen", "set --gateway-port"),
    ("admin-listen", "set --gateway-admin-port"),
    ("allowed-host", "set --gateway-extra-allowed-host"),
    ("public-url", "set a MemoryGateway's spec.publicURL"),
    ("gateway-id", "the operator names each gateway"),
    ("placement", "gateways always run with --placement cluster"),
    ("shutdown-timeout-ms", "the operator sets it to the pod's drain time"),
    ("audit-log", "set --gateway-audit-log"),
    ("kubeconfig", "gateways use their pod's ServiceAccount"),
    ("ledger-ca-file", "names a file the gateway pod does not mount"),
    ("audit-query-digest-key-file", "names a file the gateway pod does not mount"),
    ("max-in-flight", "set --gateway-max-in-flight (a MemoryGateway overrides it)"),
    ("max-connections", "set --gateway-max-connections (a MemoryGateway overrides it)"),
];

/// Validated pass-through flags: flag name (without dashes) to its values, in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServeFlags(BTreeMap<String, Vec<String>>);

impl ServeFlags {
    /// Checks `name=value` entries (empty ones skipped: an empty environment variable means none).
    pub fn parse(entries: &[String]) -> Result<Self, SettingsError> {
        let command = ServeArgs::augment_args(Command::new("serve"));
        let mut flags: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (index, entry) in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()).enumerate() {
            // Not echoed: an entry that is no name=value may be anything, a credential included.
            let Some((name, value)) = entry.split_once('=') else {
                return Err(bad(FLAG, format!("entry {} is not name=value (e.g. write-timeout-ms=20000)", index + 1)));
            };
            let name = name.trim();
            if let Some((_, instead)) = NOT_PASSED_THROUGH.iter().find(|(n, _)| *n == name) {
                return Err(bad(FLAG, format!("{name} is not passed through: {instead}")));
            }
            let Some(arg) = command.get_arguments().find(|a| a.get_long() == Some(name)) else {
                return Err(bad(FLAG, format!("{name} is not a flag of memgate-gateway serve")));
            };
            if arg.is_hide_env_values_set() {
                return Err(bad(FLAG, format!("{name} may carry a credential: give it by Secret reference")));
            }
            check_value(&command, name, value)?;
            flags.entry(name.to_owned()).or_default().push(value.to_owned());
        }
        // Together, as the gateway will see them: a flag given twice that takes one value fails here.
        let flags = Self(flags);
        if let Err(error) = command.try_get_matches_from(with_config(flags.args())) {
            return Err(bad(FLAG, first_line(&error)));
        }
        Ok(flags)
    }

    /// The value of one flag, when given once.
    pub fn value(&self, name: &str) -> Option<&str> {
        match self.0.get(name).map(Vec::as_slice) {
            Some([one]) => Some(one),
            _ => None,
        }
    }

    /// The flags as `memgate-gateway serve` arguments, in name order.
    pub fn args(&self) -> Vec<String> {
        self.0
            .iter()
            .flat_map(|(name, values)| values.iter().flat_map(move |v| [format!("--{name}"), v.clone()]))
            .collect()
    }
}

fn check_value(command: &Command, name: &str, value: &str) -> Result<(), SettingsError> {
    let argv = vec![format!("--{name}"), value.to_owned()];
    match command.clone().try_get_matches_from(with_config(argv)) {
        Ok(_) => Ok(()),
        Err(error) => Err(bad(FLAG, format!("{name}={value}: {}", first_line(&error)))),
    }
}

/// `serve --config <any> <args>`: `--config` is required, and the operator always renders it.
fn with_config(args: Vec<String>) -> Vec<String> {
    ["serve", "--config", "/config"].map(String::from).into_iter().chain(args).collect()
}

/// clap's message without its `error: ` prefix, usage and tips.
fn first_line(error: &clap::Error) -> String {
    let text = error.render().to_string();
    let line = text.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(entries: &[&str]) -> Result<ServeFlags, SettingsError> {
        ServeFlags::parse(&entries.iter().map(|e| e.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn gateway_flags_pass_through_checked_by_the_gateway_parser() {
        let flags = parse(&[
            "write-timeout-ms=20000",
            " ",
            "allowed-origin=https://a.example",
            "allowed-origin=https://b.example",
        ]);
        let flags = flags.expect("valid");
        assert_eq!(
            flags.args(),
            [
                "--allowed-origin",
                "https://a.example",
                "--allowed-origin",
                "https://b.example",
                "--write-timeout-ms",
                "20000"
            ]
        );
        assert_eq!(flags.value("write-timeout-ms"), Some("20000"));
        assert_eq!(flags.value("allowed-origin"), None, "given twice");
    }

    #[test]
    fn a_bad_value_is_refused_naming_the_flag_and_the_gateway_rule() {
        let error = parse(&["write-timeout-ms=5"]).expect_err("below the range");
        assert_eq!(error.flag, "gateway-serve-flag");
        assert!(error.message.starts_with("write-timeout-ms=5: "), "{error}");
        assert!(error.message.contains("100..=600000"), "{error}");
        let error = parse(&["write-timeout-ms=1000", "write-timeout-ms=2000"]).expect_err("twice");
        assert!(error.message.contains("--write-timeout-ms"), "{error}");
    }

    #[test]
    fn unknown_rendered_file_and_credential_flags_are_refused() {
        for (entry, says) in [
            ("write-timeout-mss=1", "is not a flag of memgate-gateway serve"),
            ("no-equals-sign", "is not name=value"),
            ("listen=0.0.0.0:1", "set --gateway-port"),
            ("public-url=https://x.example", "spec.publicURL"),
            ("ledger=redis://user:secret@redis:6379", "by Secret reference"),
            ("kubeconfig=/etc/kube", "ServiceAccount"),
        ] {
            let error = parse(&[entry]).expect_err(entry);
            assert!(error.message.contains(says), "{entry}: {error}");
            assert!(
                !error.to_string().contains("secret@"),
                "a refused value is never echoed when it may be a credential"
            );
        }
    }

    #[test]
    fn every_refused_name_is_a_gateway_flag() {
        let command = ServeArgs::augment_args(Command::new("serve"));
        for (name, _) in NOT_PASSED_THROUGH {
            assert!(command.get_arguments().any(|a| a.get_long() == Some(name)), "{name}");
        }
    }
}
