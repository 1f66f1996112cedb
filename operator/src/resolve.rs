//! Dereference: read the Secrets a namespace's providers refer to, by name, when it is reconciled.
//!
//! The only code of the operator that sees Secret data. Each referenced key is judged with the
//! shared rule (`memgate_crds::references::judge_key`: present, UTF-8, not blank, not a `${NAME}`
//! placeholder, no control characters) and the Secret is dropped at once: its data is never
//! cached, copied, logged or returned. Only a [`KeyVerdict`] leaves this module.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use memgate_crds::references::{KeyVerdict, SecretLookup, WantedKeys, judge_key};

/// Verdicts by `(secret name, key)`.
pub type SecretVerdicts = BTreeMap<(String, String), KeyVerdict>;

/// GET each wanted Secret once and judge each wanted key. A missing Secret is a verdict, not an
/// error; any other API failure is returned (the reconcile is retried with backoff).
pub async fn read_secrets(api: &Api<Secret>, wanted: &WantedKeys) -> Result<SecretVerdicts, kube::Error> {
    let mut verdicts = SecretVerdicts::new();
    for (name, keys) in wanted {
        let secret = api.get_opt(name).await?;
        verdicts.extend(judge(name, secret.as_ref(), keys));
        // `secret` (and its data) is dropped here.
    }
    Ok(verdicts)
}

/// Judge the wanted keys of one Secret (or of its absence) with the shared rule.
pub fn judge<'a>(name: &str, secret: Option<&Secret>, keys: impl IntoIterator<Item = &'a String>) -> SecretVerdicts {
    let lookup = |key: &str| match secret {
        None => SecretLookup::NoSecret,
        Some(secret) => {
            secret.data.as_ref().and_then(|d| d.get(key)).map_or(SecretLookup::NoKey, |v| SecretLookup::Value(&v.0))
        }
    };
    keys.into_iter().map(|key| ((name.to_string(), key.clone()), judge_key(lookup(key)))).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(pairs: &[(&str, &[u8])]) -> Secret {
        Secret {
            data: Some(pairs.iter().map(|(k, v)| ((*k).to_string(), ByteString(v.to_vec()))).collect()),
            ..Secret::default()
        }
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
        assert!(verdicts.values().all(|v| *v == KeyVerdict::SecretNotFound));
        assert_eq!(verdicts.len(), 2);
    }
}
