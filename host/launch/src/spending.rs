//! Budgets: the most a run — with every run it starts — may spend, in US
//! dollars and in tokens, narrowed like grants: a child gets at most what
//! its parent has left, and what a child spends its parent has spent.
//!
//! Each run with a budget, and each run whose parent has an account in
//! this process, has an [`Account`]. Usage is charged as it arrives (an
//! adapter's `moat:usage` events, one per model call, then its `done`'s
//! totals) to the run's account and every account above it; an account
//! whose budget is crossed stops its run (which ends its children), and
//! the run ends `done` with status `max_budget` ([`crate::events`]).
//!
//! A child that names a budget of its own has it set aside from its
//! parent's: what it has not spent yet its siblings cannot ask for. A
//! child that names none draws on its parent's as it spends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use moat_runs::{RecordedLimits, RunId, Spent};
use tokio_util::sync::CancellationToken;

/// The most to spend; each `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    /// US dollars.
    pub usd: Option<f64>,
    /// Tokens, input and output together.
    pub tokens: Option<u64>,
    /// Model calls.
    pub calls: Option<u64>,
}

impl Budget {
    /// No limit at all.
    pub fn is_unbounded(&self) -> bool {
        self.usd.is_none() && self.tokens.is_none() && self.calls.is_none()
    }

    /// Each limit the lower of the two.
    pub fn min(self, other: Budget) -> Budget {
        let least_f = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let least = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Budget {
            usd: least_f(self.usd, other.usd),
            tokens: least(self.tokens, other.tokens),
            calls: least(self.calls, other.calls),
        }
    }

    /// What is left of it after `spent`.
    pub fn after(self, spent: &Spent) -> Budget {
        Budget {
            usd: self
                .usd
                .map(|usd| (usd - spent.usd.unwrap_or(0.0)).max(0.0)),
            tokens: self.tokens.map(|t| t.saturating_sub(spent.tokens)),
            calls: self.calls.map(|c| c.saturating_sub(spent.calls)),
        }
    }

    /// Whether `spent` has reached it.
    fn reached_by(&self, spent: &Spent) -> bool {
        self.usd
            .is_some_and(|usd| spent.usd.unwrap_or(0.0) >= usd - f64::EPSILON)
            || self.tokens.is_some_and(|tokens| spent.tokens >= tokens)
            || self.calls.is_some_and(|calls| spent.calls >= calls)
    }

    /// The budget a record keeps (its limits).
    pub fn of_record(limits: Option<&RecordedLimits>) -> Budget {
        limits.map_or_else(Budget::default, |limits| Budget {
            usd: limits.budget_usd,
            tokens: limits.max_tokens,
            calls: limits.max_model_calls,
        })
    }

    /// In words: `$1.00, 5000 tokens and 20 model calls`.
    pub fn words(&self) -> String {
        let parts: Vec<String> = [
            self.usd.map(|usd| format!("${usd:.2}")),
            self.tokens.map(|tokens| format!("{tokens} tokens")),
            self.calls.map(|calls| match calls {
                1 => "1 model call".to_owned(),
                n => format!("{n} model calls"),
            }),
        ]
        .into_iter()
        .flatten()
        .collect();
        match parts.as_slice() {
            [] => "no limit".into(),
            [one] => one.clone(),
            [first @ .., last] => format!("{} and {last}", first.join(", ")),
        }
    }
}

/// One run's account: its budget, what it (with its children) spent, and
/// the switch that stops it.
#[derive(Debug)]
pub struct Account {
    id: RunId,
    budget: Budget,
    /// Its budget was set aside from its parent's (it named one).
    set_aside: bool,
    parent: Option<Arc<Account>>,
    abort: CancellationToken,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    spent: Spent,
    /// Its live children that set their budgets aside from it.
    set_aside: Vec<Weak<Account>>,
    /// Its budget was crossed: its run is being stopped.
    crossed: bool,
}

impl Account {
    /// The account of run `id` with `budget` (stopped by `abort`), under
    /// `parent`'s; `set_aside`: its budget is held for it from its
    /// parent's.
    pub fn new(
        id: RunId,
        budget: Budget,
        parent: Option<Arc<Account>>,
        set_aside: bool,
        abort: CancellationToken,
    ) -> Arc<Self> {
        let account = Arc::new(Self {
            id,
            budget,
            set_aside: set_aside && parent.is_some(),
            parent,
            abort,
            state: Mutex::default(),
        });
        if account.set_aside
            && let Some(parent) = &account.parent
        {
            parent.lock().set_aside.push(Arc::downgrade(&account));
        }
        account
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Its run.
    pub fn id(&self) -> &RunId {
        &self.id
    }

    /// Its budget.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// What it (with its children) spent.
    pub fn spent(&self) -> Spent {
        self.lock().spent
    }

    /// Stops its run (the budget cannot be kept: see the meter).
    pub fn stop(&self) {
        self.abort.cancel();
    }

    /// Whether its budget was crossed.
    pub fn crossed(&self) -> bool {
        self.lock().crossed
    }

    /// What a new child may have: what is left of its budget, less what
    /// its children set aside and have not spent, and no more than its
    /// parent has left.
    pub fn left(&self) -> Budget {
        let mut left = {
            let mut state = self.lock();
            state.set_aside.retain(|child| child.strong_count() > 0);
            let mut left = self.budget.after(&state.spent);
            for child in state.set_aside.iter().filter_map(Weak::upgrade) {
                let held = child.budget.after(&child.spent());
                left = Budget {
                    usd: left.usd.map(|usd| (usd - held.usd.unwrap_or(0.0)).max(0.0)),
                    tokens: left
                        .tokens
                        .map(|t| t.saturating_sub(held.tokens.unwrap_or(0))),
                    calls: left
                        .calls
                        .map(|c| c.saturating_sub(held.calls.unwrap_or(0))),
                };
            }
            left
        };
        if let Some(parent) = &self.parent {
            left = left.min(parent.left_for(self));
        }
        left
    }

    /// What is left of this account for `child`, which set its own aside
    /// (it is not held against itself).
    fn left_for(&self, child: &Account) -> Budget {
        if child.set_aside {
            // The child's own budget bounds it already.
            return Budget::default();
        }
        self.left()
    }

    /// Charges what one of its model calls used to it and every account
    /// above it; each whose budget that crosses stops its run. The
    /// accounts charged, with what each has spent now (to record).
    pub fn charge(&self, usd: Option<f64>, tokens: u64, calls: u64) -> Vec<(RunId, Spent)> {
        let mut charged = Vec::new();
        let mut account = Some(self);
        while let Some(current) = account {
            let (spent, crossed_now) = {
                let mut state = current.lock();
                if let Some(usd) = usd {
                    state.spent.usd = Some(state.spent.usd.unwrap_or(0.0) + usd);
                }
                state.spent.tokens = state.spent.tokens.saturating_add(tokens);
                state.spent.calls = state.spent.calls.saturating_add(calls);
                let crossed_now = !state.crossed && current.budget.reached_by(&state.spent);
                state.crossed |= crossed_now;
                (state.spent, crossed_now)
            };
            if crossed_now {
                tracing::info!(
                    run = %current.id,
                    budget = %current.budget.words(),
                    "the run's budget is spent; stopping it"
                );
                current.abort.cancel();
            }
            charged.push((current.id.clone(), spent));
            account = current.parent.as_deref();
        }
        charged
    }
}

/// The accounts of the runs live in one launcher, by run: a child's
/// admission finds its parent's here.
#[derive(Debug, Default)]
pub(crate) struct Accounts(Mutex<HashMap<RunId, Weak<Account>>>);

impl Accounts {
    /// Run `id`'s account, while its run is live here.
    pub(crate) fn get(&self, id: &RunId) -> Option<Arc<Account>> {
        let accounts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        accounts.get(id).and_then(Weak::upgrade)
    }

    /// Keeps `account` (for as long as its run holds it).
    pub(crate) fn add(&self, account: &Arc<Account>) {
        let mut accounts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        accounts.retain(|_, kept| kept.strong_count() > 0);
        accounts.insert(account.id.clone(), Arc::downgrade(account));
    }
}

/// The budget a run asking `asked` gets under a ceiling that allows
/// `most` per run (held by `holder`) and a parent that has `parent` left:
/// what it names, unless that is more than either allows (refused, as
/// grants are); else all both allow.
pub(crate) fn narrow(
    asked: Budget,
    most: Budget,
    holder: &str,
    parent: Option<(&RunId, Budget)>,
) -> Result<Budget, crate::Refusal> {
    use crate::refusal::{Bound, Refusal};
    use moat_engine::Setting;
    if let Some(usd) = asked.usd
        && !(usd.is_finite() && usd > 0.0)
    {
        return Err(Refusal::Limit {
            setting: Setting::MaxBudget,
            asked: usd.to_string(),
            most: "a positive number of dollars".into(),
            bound: Bound::Ceiling(holder.to_owned()),
        });
    }
    let check = |setting,
                 asked: Option<f64>,
                 most: Option<f64>,
                 bound: Bound,
                 shown: &dyn Fn(f64) -> String| {
        match (asked, most) {
            (Some(asked), Some(most)) if asked > most + f64::EPSILON => Err(Refusal::Limit {
                setting,
                asked: shown(asked),
                most: match setting {
                    Setting::MaxBudget => format!("${most:.2}"),
                    _ => shown(most),
                },
                bound,
            }),
            _ => Ok(()),
        }
    };
    let dollars = |usd: f64| format!("{usd:.2}");
    let count = |n: f64| format!("{n:.0}");
    let ceiling = Bound::Ceiling(holder.to_owned());
    check(
        Setting::MaxBudget,
        asked.usd,
        most.usd,
        ceiling.clone(),
        &dollars,
    )?;
    let as_f = |n: Option<u64>| n.map(|n| n as f64);
    check(
        Setting::MaxTokens,
        as_f(asked.tokens),
        as_f(most.tokens),
        ceiling.clone(),
        &count,
    )?;
    check(
        Setting::MaxModelCalls,
        as_f(asked.calls),
        as_f(most.calls),
        ceiling,
        &count,
    )?;
    let mut bound = most;
    if let Some((id, left)) = parent {
        let parent = Bound::Parent(id.clone());
        check(
            Setting::MaxBudget,
            asked.usd,
            left.usd,
            parent.clone(),
            &dollars,
        )?;
        check(
            Setting::MaxTokens,
            as_f(asked.tokens),
            as_f(left.tokens),
            parent.clone(),
            &count,
        )?;
        check(
            Setting::MaxModelCalls,
            as_f(asked.calls),
            as_f(left.calls),
            parent,
            &count,
        )?;
        bound = bound.min(left);
    }
    Ok(Budget {
        usd: asked.usd.or(bound.usd),
        tokens: asked.tokens.or(bound.tokens),
        calls: asked.calls.or(bound.calls),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(budget: Budget, parent: Option<Arc<Account>>, set_aside: bool) -> Arc<Account> {
        Account::new(
            RunId::new(),
            budget,
            parent,
            set_aside,
            CancellationToken::new(),
        )
    }

    fn usd(usd: f64) -> Budget {
        Budget {
            usd: Some(usd),
            tokens: None,
            calls: None,
        }
    }

    #[test]
    fn a_childs_budget_set_aside_is_not_there_for_its_siblings() {
        let parent = account(usd(1.0), None, false);
        let first = account(usd(0.8), Some(parent.clone()), true);
        let left = parent.left().usd.unwrap();
        assert!((left - 0.2).abs() < 1e-9, "{left}");
        // Spending from what was set aside leaves the parent's left alone.
        first.charge(Some(0.3), 10, 1);
        assert!((parent.left().usd.unwrap() - 0.2).abs() < 1e-9);
        assert!((parent.spent().usd.unwrap() - 0.3).abs() < 1e-9);
        // Once the child is gone, what it did not spend is free again.
        drop(first);
        assert!((parent.left().usd.unwrap() - 0.7).abs() < 1e-9);
    }

    #[test]
    fn spending_past_a_budget_stops_that_run_and_counts_above_it() {
        let parent = account(
            Budget {
                usd: None,
                tokens: Some(100),
                calls: None,
            },
            None,
            false,
        );
        let child = account(Budget::default(), Some(parent.clone()), false);
        assert_eq!(
            child.left().tokens,
            Some(100),
            "a child draws on its parent's"
        );
        let charged = child.charge(None, 60, 1);
        assert_eq!(charged.len(), 2);
        assert!(!parent.crossed());
        child.charge(None, 40, 1);
        assert!(parent.crossed());
        assert!(parent.abort.is_cancelled());
        assert!(!child.crossed(), "the child had no budget of its own");
        assert_eq!(child.left().tokens, Some(0));
    }
}
