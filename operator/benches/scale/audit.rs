//! The API server's audit log as the exact count of the requests one identity made.
//!
//! The policy logs every request of a ServiceAccount (the operator is the only one that calls the
//! API server in this benchmark) at `Metadata` level and nothing else. A request is counted once,
//! by its `RequestReceived` event: every request has exactly one, written when it arrives, so a
//! watch is counted in the phase it was opened (its `ResponseComplete` only comes when it ends,
//! minutes later). `ResponseComplete` events are read only for the status codes of failures.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

/// The audit policy: `Metadata` for ServiceAccounts, nothing for anyone else (the admin's own
/// requests would only make the log larger).
pub const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted, Panic]
rules:
- level: Metadata
  userGroups: [\"system:serviceaccounts\"]
- level: None
";

/// The verbs that change something.
pub const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// The verbs of the table, in this order.
pub const VERBS: [&str; 8] = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];

/// Whether `verb` is a write.
pub fn is_write(verb: &str) -> bool {
    WRITE_VERBS.contains(&verb)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    stage: String,
    verb: String,
    user: User,
    object_ref: Option<ObjectRef>,
    response_status: Option<ResponseStatus>,
    request_received_timestamp: String,
}

#[derive(Deserialize)]
struct User {
    username: String,
}

#[derive(Deserialize)]
struct ObjectRef {
    resource: Option<String>,
    subresource: Option<String>,
}

#[derive(Deserialize)]
struct ResponseStatus {
    code: Option<u16>,
}

/// One request of the audited identity.
#[derive(Debug, Clone)]
pub struct Request {
    /// When the API server received it.
    pub at: Timestamp,
    /// `get`, `list`, `watch`, `create`, ...
    pub verb: String,
    /// `resource` or `resource/subresource` (empty for non-resource URLs).
    pub resource: String,
}

/// What the audit log says one user did.
#[derive(Debug, Default)]
pub struct Log {
    /// Every request, in log order.
    pub requests: Vec<Request>,
    /// Failed responses: the request and its status code.
    pub failures: Vec<(Request, u16)>,
    /// Lines that were not audit events (a torn last line, say).
    pub unreadable: usize,
}

/// Read the requests of `username` from the audit log at `path`.
pub fn read(path: &Path, username: &str) -> Result<Log> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the audit log {}", path.display()))?;
    let mut log = Log::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(event) = serde_json::from_str::<Event>(line) else {
            log.unreadable += 1;
            continue;
        };
        if event.user.username != username {
            continue;
        }
        let resource = resource_of(event.object_ref.as_ref());
        let at = event
            .request_received_timestamp
            .parse()
            .with_context(|| format!("audit timestamp {:?}", event.request_received_timestamp))?;
        let request = Request { at, verb: event.verb, resource };
        match event.stage.as_str() {
            "RequestReceived" => log.requests.push(request),
            "ResponseComplete" => {
                let code = event.response_status.and_then(|s| s.code).unwrap_or_default();
                if code >= 400 {
                    log.failures.push((request, code));
                }
            }
            _ => {}
        }
    }
    Ok(log)
}

fn resource_of(object: Option<&ObjectRef>) -> String {
    let Some(object) = object else { return String::new() };
    let resource = object.resource.clone().unwrap_or_default();
    match &object.subresource {
        Some(sub) if !sub.is_empty() => format!("{resource}/{sub}"),
        _ => resource,
    }
}

/// Requests counted by verb, and by `(resource, verb)`.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// By verb.
    pub verbs: BTreeMap<String, usize>,
    /// By `(resource, verb)`.
    pub resources: BTreeMap<(String, String), usize>,
}

impl Tally {
    /// Count `requests`.
    pub fn of<'a>(requests: impl IntoIterator<Item = &'a Request>) -> Tally {
        let mut tally = Tally::default();
        for r in requests {
            *tally.verbs.entry(r.verb.clone()).or_default() += 1;
            *tally.resources.entry((r.resource.clone(), r.verb.clone())).or_default() += 1;
        }
        tally
    }

    /// Every request.
    pub fn total(&self) -> usize {
        self.verbs.values().sum()
    }

    /// Requests with `verb`.
    pub fn verb(&self, verb: &str) -> usize {
        self.verbs.get(verb).copied().unwrap_or_default()
    }

    /// Writes (create, update, patch, delete).
    pub fn writes(&self) -> usize {
        self.verbs.iter().filter(|(v, _)| is_write(v)).map(|(_, n)| n).sum()
    }

    /// Writes to any resource but `resource` (e.g. everything but the leader Lease).
    pub fn writes_except(&self, resource: &str) -> usize {
        self.resources.iter().filter(|((r, v), _)| r != resource && is_write(v)).map(|(_, n)| n).sum()
    }

    /// Requests with `verb` on `resource`.
    pub fn resource_verb(&self, resource: &str, verb: &str) -> usize {
        self.resources.get(&(resource.to_string(), verb.to_string())).copied().unwrap_or_default()
    }

    /// Writes to `resource`.
    pub fn resources_writes(&self, resource: &str) -> usize {
        self.resources.iter().filter(|((r, v), _)| r == resource && is_write(v)).map(|(_, n)| n).sum()
    }

    /// Reads of any resource but `resource`.
    pub fn reads_except(&self, resource: &str) -> usize {
        self.resources.iter().filter(|((r, v), _)| r != resource && !is_write(v)).map(|(_, n)| n).sum()
    }
}
