//! A run's requests for approval and their answers, kept beside the run
//! so that any moat process on the machine can answer them (`moat
//! approve` in another terminal, a protocol client of another server) and
//! the moat that runs it finds the answer.

use moat_runs::{Answer, Approval, ApprovalRequest, MAX_REQUESTS, RunId, RunsError, pick_open};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use crate::{Store, StoreError, write_error};

impl Store {
    /// Records `request` as the next request of the live run `id`, open:
    /// the run reads as `waiting` until it is answered.
    pub fn ask(&self, id: &RunId, request: &ApprovalRequest) -> Result<Approval, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(write_error)?;
        live_status(&tx, id)?;
        let last: u32 = tx.query_row(
            "SELECT COALESCE(MAX(number), 0) FROM approvals WHERE run_id = ?1",
            [id.as_str()],
            |row| row.get(0),
        )?;
        if last >= MAX_REQUESTS {
            return Err(StoreError::Refused(format!(
                "{id} asked {MAX_REQUESTS} times, the most a run may ask"
            )));
        }
        let approval = Approval {
            number: last + 1,
            request: request.clone(),
            asked_ms: moat_engine::now_ms(),
            answer: None,
        };
        tx.execute(
            "INSERT INTO approvals (run_id, number, request, asked_ms) VALUES (?1, ?2, ?3, ?4)",
            params![
                id.as_str(),
                approval.number,
                serde_json::to_string(&approval.request).expect("a request is plain data"),
                approval.asked_ms as i64,
            ],
        )
        .map_err(write_error)?;
        tx.commit().map_err(write_error)?;
        Ok(approval)
    }

    /// The run's requests, oldest first.
    pub fn approvals(&self, id: &RunId) -> Result<Vec<Approval>, StoreError> {
        read_approvals(&self.conn(), id)
    }

    /// The answer to request `number` of run `id`, once it has one.
    pub fn answer_of(&self, id: &RunId, number: u32) -> Result<Option<Answer>, StoreError> {
        let answer: Option<Option<String>> = self
            .conn()
            .query_row(
                "SELECT answer FROM approvals WHERE run_id = ?1 AND number = ?2",
                params![id.as_str(), number],
                |row| row.get(0),
            )
            .optional()?;
        Ok(answer
            .flatten()
            .and_then(|text| serde_json::from_str(&text).ok()))
    }

    /// Answers request `number` (`None`: the only open one) of the live
    /// run `id`: the first answer wins.
    pub fn answer(
        &self,
        id: &RunId,
        number: Option<u32>,
        answer: &Answer,
    ) -> Result<Approval, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(write_error)?;
        // A run that ended has its requests closed: said before anything
        // about them.
        live_status(&tx, id)?;
        let approvals = read_approvals(&tx, id)?;
        let number = pick_open(id.as_str(), &approvals, number).map_err(|error| match error {
            RunsError::NotFound(what) => StoreError::NotFound(what),
            other => StoreError::Refused(other.to_string()),
        })?;
        tx.execute(
            "UPDATE approvals SET answer = ?3 WHERE run_id = ?1 AND number = ?2 AND answer IS NULL",
            params![
                id.as_str(),
                number,
                serde_json::to_string(answer).expect("an answer is plain data")
            ],
        )
        .map_err(write_error)?;
        tx.commit().map_err(write_error)?;
        let mut answered = approvals
            .into_iter()
            .find(|a| a.number == number)
            .expect("picked from these");
        answered.answer = Some(answer.clone());
        Ok(answered)
    }
}

/// Refuses a run that is not live (or not recorded).
fn live_status(conn: &rusqlite::Connection, id: &RunId) -> Result<(), StoreError> {
    let status: Option<String> = conn
        .query_row(
            "SELECT status FROM runs WHERE id = ?1",
            [id.as_str()],
            |row| row.get(0),
        )
        .optional()?;
    match status.as_deref() {
        None => Err(StoreError::NotFound(id.to_string())),
        Some("pending" | "running") => Ok(()),
        Some(status) => Err(StoreError::Refused(format!(
            "{id} has ended ({status}); its requests are closed"
        ))),
    }
}

fn read_approvals(conn: &rusqlite::Connection, id: &RunId) -> Result<Vec<Approval>, StoreError> {
    let mut query = conn.prepare_cached(
        "SELECT number, request, asked_ms, answer FROM approvals WHERE run_id = ?1 ORDER BY number",
    )?;
    let rows = query.query_map([id.as_str()], |row| {
        Ok((
            row.get::<_, u32>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, i64>(2)?,
            row.get::<_, Option<String>>(3)?,
        ))
    })?;
    let mut approvals = Vec::new();
    for row in rows {
        let (number, request, asked_ms, answer) = row?;
        // Written by moat as JSON: a row that does not read is skipped,
        // never guessed at.
        let Ok(request) = serde_json::from_str(&request) else {
            tracing::warn!(run = %id, number, "a request in the store does not read; skipped");
            continue;
        };
        approvals.push(Approval {
            number,
            request,
            asked_ms: asked_ms as u64,
            answer: answer.and_then(|text| serde_json::from_str(&text).ok()),
        });
    }
    Ok(approvals)
}
