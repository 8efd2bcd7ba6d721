//! A run's requests for approval on the cluster: kept in its record (the
//! records bucket, changed by compare-and-set), so the worker running it
//! and any submitter's `moat approve --nats` see the same requests, and
//! the first answer wins.

use moat_runs::{
    ANSWER_POLL, Answer, Approval, ApprovalRequest, MAX_REQUESTS, RunsError, pick_open,
};

use crate::Cluster;
use crate::cluster::records::Change;
use crate::error::ClusterError;

impl Cluster {
    /// Records `request` as run `id`'s next request, open: the run reads
    /// `waiting` until it is answered.
    pub async fn ask(&self, id: &str, request: &ApprovalRequest) -> Result<Approval, ClusterError> {
        let mut asked = None;
        let mut refused = None;
        self.update(id, |run| {
            if run.is_terminal() {
                refused = Some(format!(
                    "{id} has ended ({}); its requests are closed",
                    run.status
                ));
                return Change::Keep;
            }
            if run.approvals.len() >= MAX_REQUESTS as usize {
                refused = Some(format!(
                    "{id} asked {MAX_REQUESTS} times, the most a run may ask"
                ));
                return Change::Keep;
            }
            let approval = Approval {
                number: run.approvals.len() as u32 + 1,
                request: request.clone(),
                asked_ms: moat_engine::now_ms(),
                answer: None,
            };
            run.approvals.push(approval.clone());
            asked = Some(approval);
            Change::Write
        })
        .await?;
        if let Some(why) = refused {
            return Err(ClusterError::Invalid(why));
        }
        asked.ok_or_else(|| ClusterError::NotFound(id.to_owned()))
    }

    /// Run `id`'s requests, oldest first.
    pub async fn approvals(&self, id: &str) -> Result<Vec<Approval>, ClusterError> {
        let run = self
            .get(id)
            .await?
            .ok_or_else(|| ClusterError::NotFound(id.to_owned()))?;
        Ok(run.approvals)
    }

    /// The answer to request `number` of run `id`, once it has one.
    pub async fn answer_of(&self, id: &str, number: u32) -> Result<Option<Answer>, ClusterError> {
        let approvals = self.approvals(id).await?;
        Ok(approvals
            .into_iter()
            .find(|a| a.number == number)
            .and_then(|a| a.answer))
    }

    /// Waits until request `number` of run `id` is answered.
    pub async fn answer_to(&self, id: &str, number: u32) -> Result<Answer, ClusterError> {
        loop {
            if let Some(answer) = self.answer_of(id, number).await? {
                return Ok(answer);
            }
            tokio::time::sleep(ANSWER_POLL).await;
        }
    }

    /// Answers request `number` (`None`: the only open one) of the live run
    /// `id`: the first answer wins.
    pub async fn answer(
        &self,
        id: &str,
        number: Option<u32>,
        answer: &Answer,
    ) -> Result<Approval, ClusterError> {
        let mut answered = None;
        let mut refused = None;
        self.update(id, |run| {
            if run.is_terminal() {
                refused = Some(ClusterError::Invalid(format!(
                    "{id} has ended ({}); its requests are closed",
                    run.status
                )));
                return Change::Keep;
            }
            let picked = match pick_open(id, &run.approvals, number) {
                Ok(picked) => picked,
                Err(RunsError::NotFound(what)) => {
                    refused = Some(ClusterError::NotFound(what));
                    return Change::Keep;
                }
                Err(error) => {
                    refused = Some(ClusterError::Invalid(error.to_string()));
                    return Change::Keep;
                }
            };
            let approval = run
                .approvals
                .iter_mut()
                .find(|a| a.number == picked)
                .expect("picked from these");
            approval.answer = Some(answer.clone());
            answered = Some(approval.clone());
            Change::Write
        })
        .await?;
        if let Some(error) = refused {
            return Err(error);
        }
        answered.ok_or_else(|| ClusterError::NotFound(id.to_owned()))
    }
}
