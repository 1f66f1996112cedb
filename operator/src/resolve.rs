//! Dereference: read the Secrets a namespace's providers refer to, by name, when it is reconciled.
//!
//! The only code of the operator that sees Secret data, and only of Secrets labelled
//! `memgate.io/credential: "true"` by the platform team. Each referenced key is judged with the
//! shared rule (`memgate_crds::references::judge_key`: present, UTF-8, not blank, not a `${NAME}`
//! placeholder, no control characters) and the Secret is dropped at once: its data is never
//! cached, copied, logged or returned. Only a [`KeyVerdict`] leaves this module.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use memgate_crds::is_credential;
use memgate_crds::references::{KeyVerdict, SecretLookup, WantedKeys, judge_key};

/// Verdicts by `(secret name, key)`.
pub type SecretVerdicts = BTreeMap<(String, String), KeyVerdict>;

/// Judge each wanted key. Only Secrets in `labelled` (the names the credential-label watch has
/// seen) are read, once each, by name; any other is [`KeyVerdict::NotPermitted`] without a read.
/// A Secret gone or unlabelled since is a verdict too; any other API failure is returned (the
/// reconcile is retried with backoff).
pub async fn read_secrets(
    api: &Api<Secret>,
    wanted: &WantedKeys,
    labelled: &BTreeSet<String>,
) -> Result<SecretVerdicts, kube::Error> {
    let mut verdicts = SecretVerdicts::new();
    for (name, keys) in wanted {
        let secret = if labelled.contains(name) { api.get_opt(name).await? } else { None };
        verdicts.extend(judge(name, secret.as_ref(), keys));
        // `secret` (and its data) is dropped here.
    }
    Ok(verdicts)
}

/// Judge the wanted keys of one Secret with the shared rule: absent or without the credential label,
/// every key is [`KeyVerdict::NotPermitted`] (one verdict for both, so names cannot be probed).
pub fn judge<'a>(name: &str, secret: Option<&Secret>, keys: impl IntoIterator<Item = &'a String>) -> SecretVerdicts {
    let permitted = secret.filter(|s| is_credential(s.metadata.labels.as_ref()));
    let lookup = |key: &str| match permitted {
        None => SecretLookup::NotPermitted,
        Some(secret) => {
            secret.data.as_ref().and_then(|d| d.get(key)).map_or(SecretLookup::NoKey, |v| SecretLookup::Value(&v.0))
        }
    };
    keys.into_iter().map(|key| ((name.to_string(), key.clone()), judge_key(lookup(key)))).collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    fn secret(pairs: &[(&str, &[u8])]) -> Secret {
        let mut secret = Secret {
            data: Some(pairs.iter().map(|(k, v)| ((*k).to_string(), ByteString(v.to_vec()))).collect()),
            ..Secret::default()
        };
        secret.metadata.labels = Some([("memgate.io/credential".to_string(), "true".to_string())].into());
        secret
    }

    fn keys(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn each_wanted_key_gets_a_verdict_that_never_carries_the_value() {
        let s = secret(&[("api-key", b"PLANTED-VALUE-1"), ("blank", b"  \n"), ("placeholder", b"${API_KEY}")]);
        let verdicts = judge("mem0-api", Some(&s), &keys(&["api-key", "blank", "placeholder", "absent"]));
        let of = |key: &str| verdicts[&("mem0-api".to_string(), key.to_string())].clone();
        assert_eq!(of("api-key"), KeyVerdict::Usable);
        assert_eq!(of("absent"), KeyVerdict::KeyMissing);
        assert!(matches!(of("blank"), KeyVerdict::Unusable(m) if m.contains("blank")));
        assert!(
            matches!(of("placeholder"), KeyVerdict::Unusable(m) if m.contains("placeholder") && !m.contains("API_KEY"))
        );
        assert!(!format!("{verdicts:?}").contains("PLANTED"));
    }

    #[test]
    fn a_missing_secret_fails_every_key_it_should_hold() {
        let verdicts = judge("gone", None, &keys(&["a", "b"]));
        assert!(verdicts.values().all(|v| *v == KeyVerdict::NotPermitted));
        assert_eq!(verdicts.len(), 2);
    }

    #[test]
    fn an_unlabelled_secret_is_judged_exactly_like_an_absent_one_and_never_read() {
        let mut unlabelled = secret(&[("api-key", b"PLANTED-VALUE-2"), ("blank", b" ")]);
        unlabelled.metadata.labels = Some([("memgate.io/credential".to_string(), "yes".to_string())].into());
        let wanted = keys(&["api-key", "blank", "absent"]);
        let judged = judge("db-password", Some(&unlabelled), &wanted);
        assert_eq!(judged, judge("db-password", None, &wanted), "no key, value or existence is revealed");
        assert!(judged.values().all(|v| *v == KeyVerdict::NotPermitted));
    }
}
