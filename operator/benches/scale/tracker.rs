//! The admin's watch of every MemoryProvider: how many are Accepted and ResolvedRefs, how many are
//! Ready, the moment it changes (a watch, not polling, so the times are not rounded to a period).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Result, bail};
use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use memgate_crds::MemoryProvider;
use tokio::sync::watch;

use crate::support;

/// Counts over every provider seen.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    /// Accepted=True and ResolvedRefs=True.
    pub accepted: usize,
    /// Ready=True.
    pub ready: usize,
}

#[derive(Debug, Clone, Copy)]
struct Flags {
    accepted: bool,
    ready: bool,
}

type States = BTreeMap<(String, String), Flags>;

/// A running watch of every provider.
pub struct Tracker {
    states: Arc<Mutex<States>>,
    progress: watch::Receiver<Progress>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn is_true(object: &DynamicObject, type_: &str) -> bool {
    support::condition(object, type_).is_some_and(|(status, _, _)| status == "True")
}

fn flags(object: &DynamicObject) -> Flags {
    Flags { accepted: is_true(object, "Accepted") && is_true(object, "ResolvedRefs"), ready: is_true(object, "Ready") }
}

fn key(object: &DynamicObject) -> (String, String) {
    (object.metadata.namespace.clone().unwrap_or_default(), object.metadata.name.clone().unwrap_or_default())
}

fn count(states: &States) -> Progress {
    Progress {
        accepted: states.values().filter(|f| f.accepted).count(),
        ready: states.values().filter(|f| f.ready).count(),
    }
}

impl Tracker {
    /// Start watching with the admin client.
    pub fn start(admin: &Client) -> Tracker {
        let api: Api<DynamicObject> = Api::all_with(admin.clone(), &ApiResource::erase::<MemoryProvider>(&()));
        let states = Arc::new(Mutex::new(States::new()));
        let (sender, progress) = watch::channel(Progress::default());
        let shared = Arc::clone(&states);
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
            while let Some(event) = stream.next().await {
                let mut states = shared.lock().unwrap_or_else(PoisonError::into_inner);
                match event {
                    Ok(Event::Apply(o) | Event::InitApply(o)) => {
                        states.insert(key(&o), flags(&o));
                    }
                    Ok(Event::Delete(o)) => {
                        states.remove(&key(&o));
                    }
                    Ok(Event::Init | Event::InitDone) => {}
                    Err(error) => eprintln!("scale: the admin's provider watch failed ({error}); retrying"),
                }
                sender.send_replace(count(&states));
            }
        });
        Tracker { states, progress, task }
    }

    /// The counts now.
    pub fn progress(&self) -> Progress {
        *self.progress.borrow()
    }

    /// Wait until `done` holds, at most `patience`.
    pub async fn wait(&self, what: &str, done: impl Fn(&Progress) -> bool, patience: Duration) -> Result<()> {
        let mut receiver = self.progress.clone();
        match tokio::time::timeout(patience, receiver.wait_for(|p| done(p))).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => bail!("the admin's provider watch ended while waiting for {what}"),
            Err(_) => bail!("{what} not reached within {patience:?}: {:?}", self.progress()),
        }
    }

    /// Namespaces with at least one provider not Ready.
    pub fn namespaces_not_ready(&self) -> Vec<String> {
        let states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        let mut behind: Vec<String> = states.iter().filter(|(_, f)| !f.ready).map(|((ns, _), _)| ns.clone()).collect();
        behind.dedup();
        behind
    }
}
