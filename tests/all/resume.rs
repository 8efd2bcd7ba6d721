//! Resume with fallback, through each CLI adapter as a real component: the
//! fake CLI replays the real CLI's recording of a `--resume` of a session
//! it does not have (tests/fixtures/cli/<cli>/resume-missing.jsonl) at its
//! first start, then a fresh session's recording at its second. The run
//! says why it fell back (`moat:resume_fallback`), goes on as the fresh
//! session, and its result carries the new session; with the fallback off
//! the failure is the run's end.

use moat_engine::{DoneStatus, EventPayload, RESUME_FALLBACK_EVENT, codes, run_to_result};
use moat_grants::TrustLevel;
use moat_testkit::fake_cli::{FakeCli, run};
use moat_testkit::{error_codes, single_done};
use serde_json::json;

/// The session id the recordings were asked to resume.
const MISSING: &str = "0b7c1e8e-1111-4222-8333-444455556666";

/// (adapter, CLI program, the CLI's words for the missing session, how the
/// resume appears in the CLI's arguments)
const CLIS: [(&str, &str, &str, &str); 3] = [
    (
        "claude-code",
        "claude",
        "No conversation found",
        "--resume=",
    ),
    ("codex", "codex", "no rollout found", "resume"),
    ("gemini", "gemini", "Error resuming session", "--resume="),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_cli_no_longer_has_falls_back_to_a_fresh_one_saying_why() {
    for (adapter, cli, words, resume_arg) in CLIS {
        let fake = FakeCli::starts(cli, cli, &["resume-missing", "text"], json!({"speed": 0}));
        let mut request = fake.request_at(adapter, "Say hello again.", TrustLevel::Controlled);
        request.options.resume = Some(MISSING.into());
        let events = run(adapter, request).await;

        let fallback = events
            .iter()
            .find_map(|e| match &e.payload {
                EventPayload::Extension(x) if x.name == RESUME_FALLBACK_EVENT => Some(&x.payload),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{adapter}: no fallback event"));
        assert!(
            fallback["reason"].as_str().unwrap().contains(words),
            "{adapter}: {fallback}"
        );
        assert_eq!(fallback["resume"], MISSING);
        assert!(
            !error_codes(&events).contains(&codes::SESSION_NOT_FOUND.to_owned()),
            "{adapter}: the failed attempt's error is replaced: {}",
            moat_testkit::describe(&events)
        );
        assert_eq!(
            single_done(&events).status,
            DoneStatus::Success,
            "{adapter}"
        );

        let result = run_to_result(futures::stream::iter(events), &mut ()).await;
        assert_eq!(result.status, DoneStatus::Success);
        assert!(result.text.is_some(), "{adapter}");
        let session = result.session_id.unwrap();
        assert_ne!(session, MISSING, "{adapter}: the fresh session's id");
        assert_eq!(
            result.resume_token.as_deref(),
            Some(session.as_str()),
            "{adapter}"
        );

        let first = fake.args_of_start(1).unwrap();
        let second = fake.args_of_start(2).expect("started again");
        assert!(
            first.iter().any(|a| a.starts_with(resume_arg)),
            "{adapter}: {first:?}"
        );
        assert!(
            first.iter().any(|a| a.contains(MISSING)),
            "{adapter}: {first:?}"
        );
        assert!(
            !second.iter().any(|a| a.contains(MISSING)),
            "{adapter}: {second:?}"
        );
        assert!(fake.args_of_start(3).is_none(), "{adapter}: once only");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_fallback_off_a_missing_session_ends_the_run() {
    for (adapter, cli, words, _) in CLIS {
        let fake = FakeCli::starts(cli, cli, &["resume-missing", "text"], json!({"speed": 0}));
        let mut request = fake.request_at(adapter, "Say hello again.", TrustLevel::Controlled);
        request.options.resume = Some(MISSING.into());
        request.resume_fallback = false;
        let events = run(adapter, request).await;
        assert_eq!(
            error_codes(&events),
            [codes::SESSION_NOT_FOUND],
            "{adapter}: {}",
            moat_testkit::describe(&events)
        );
        let done = single_done(&events);
        assert_eq!(done.status, DoneStatus::Error, "{adapter}");
        let result = run_to_result(futures::stream::iter(events), &mut ()).await;
        assert!(result.error.unwrap().message.contains(words), "{adapter}");
        assert!(
            fake.args_of_start(2).is_none(),
            "{adapter}: not started again"
        );
    }
}
