//! The questions an approvals server holds, and the rule that answers them: a question is
//! pending until it is answered, withdrawn (its asker hung up) or expired, and the first
//! of these wins. Everything after that about the same question is refused and changes
//! nothing. Pure state: the server drives it and owns the clock.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// The two answers a question can get. Nothing else is ever sent back to an asker.
pub use crate::approval::request::Decision;
use crate::approval::request::{self, Request, Requested, Standing};
use crate::approval::{neutralise, shell_quote};

/// How many pending questions one server holds at once; more are refused (the asker
/// reports its question as unavailable).
pub const MAX_PENDING: usize = 64;
/// How many ended questions are remembered: shown as recent decisions, and answered with
/// "already answered" rather than "unknown id".
const MAX_ENDED: usize = 200;
/// How many ended questions a view lists.
const SHOWN_ENDED: usize = 20;
/// The longest an asker may ask to wait (the asking side's own upper bound).
const MAX_WAIT: Duration = Duration::from_secs(86_400);
/// The shortest id prefix `answer` accepts in place of the whole id.
pub const MIN_PREFIX: usize = 6;

/// Who answered, for the record the panel and `list` show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Who {
    Panel,
    Cli,
    Watch,
}

/// How an answer names its question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// By its whole id (the panel, which has it).
    Whole,
    /// By its whole id, or by a start of it of at least [`MIN_PREFIX`] characters that no
    /// other id shares (a person typing `approvals allow`).
    WholeOrStart,
}

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Pending,
    Decided {
        decision: Decision,
        by: Who,
    },
    /// The asker hung up: interrupted, killed, or gave up waiting.
    Withdrawn,
    /// Its `expires_at` passed unanswered.
    Expired,
}

impl Fate {
    fn as_str(self) -> &'static str {
        match self {
            Fate::Pending => "pending",
            Fate::Decided { decision, .. } => decision.as_str(),
            Fate::Withdrawn => "withdrawn",
            Fate::Expired => "expired",
        }
    }
}

/// Why a question is not taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AskRefused {
    #[error("the request is not an escalation question: {0}")]
    Invalid(String),
    #[error("a question with the id {0} was already asked")]
    RepeatedId(String),
    #[error("{MAX_PENDING} questions are already pending")]
    Full,
}

/// Why an answer is refused. Each leaves the board as it was.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AnswerRefused {
    #[error("no question has the id {0}")]
    Unknown(String),
    #[error("{0} is the start of more than one question's id: give more of it")]
    Ambiguous(String),
    #[error("the question {id} was already answered: {state}")]
    Answered { id: String, state: &'static str },
    #[error("the question {0} was withdrawn: its command is no longer waiting")]
    Withdrawn(String),
    #[error("the question {0} expired unanswered")]
    Expired(String),
}

struct Entry {
    request: Request,
    received: SystemTime,
    expires: SystemTime,
    fate: Fate,
    ended: Option<SystemTime>,
    /// Where the answer goes: the connection of the asker, waiting.
    reply: Option<oneshot::Sender<Decision>>,
}

/// All questions: pending ones (oldest first) and the most recent ended ones.
#[derive(Default)]
pub struct Board {
    version: u64,
    pending: Vec<Entry>,
    ended: VecDeque<Entry>,
}

/// One question as the panel and the clients see it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct QuestionView {
    pub id: String,
    pub state: String,
    pub argv: Vec<String>,
    pub cwd: String,
    pub workspace: String,
    pub standing: Standing,
    pub requested: Requested,
    pub received_at: String,
    pub expires_at: String,
    pub age_s: u64,
    pub expires_in_s: u64,
    pub decided_at: Option<String>,
    pub decided_by: Option<Who>,
    /// What a person is shown: the same facts with nothing that can hide or repaint (see
    /// `approval::neutralise`), for the panel and the terminal clients alike.
    pub shown: Shown,
}

/// A question's facts as a person sees them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Shown {
    /// `argv`, each argument a shell word.
    pub command: String,
    pub cwd: String,
    pub workspace: String,
    pub justification: String,
}

/// The whole board at one version.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BoardView {
    pub version: u64,
    pub now: String,
    pub pending: Vec<QuestionView>,
    pub decided: Vec<QuestionView>,
}

/// Checks what the server relies on and returns when the question expires, capped at the
/// longest wait an asker can ask for.
fn validate(request: &Request, now: SystemTime) -> Result<SystemTime, AskRefused> {
    let invalid = |why: &str| Err(AskRefused::Invalid(why.to_owned()));
    if request.version != request::VERSION {
        return invalid("unknown version");
    }
    if request.kind != request::KIND {
        return invalid("kind is not sandbox_escalation");
    }
    let id_ok = (1..=64).contains(&request.id.len())
        && request
            .id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !id_ok {
        return invalid("the id must be 1 to 64 letters, digits, - or _");
    }
    if !Decision::ALL
        .iter()
        .all(|o| request.options.iter().any(|x| x == o.as_str()))
    {
        return invalid("options must offer allowed-once and rejected");
    }
    let Ok(expires) = humantime::parse_rfc3339(&request.expires_at) else {
        return invalid("expires_at is not an RFC 3339 time");
    };
    Ok(expires.min(now + MAX_WAIT))
}

impl Board {
    /// Bumped by every change, so a watcher can wait for the next one.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Takes a new question. The receiver gets the decision; it is dropped unanswered when
    /// the question is withdrawn or expires.
    pub fn ask(
        &mut self,
        request: Request,
        now: SystemTime,
    ) -> Result<(oneshot::Receiver<Decision>, SystemTime), AskRefused> {
        let expires = validate(&request, now)?;
        if self.find(&request.id).is_some() {
            return Err(AskRefused::RepeatedId(request.id));
        }
        if self.pending.len() >= MAX_PENDING {
            return Err(AskRefused::Full);
        }
        let (tx, rx) = oneshot::channel();
        self.pending.push(Entry {
            request,
            received: now,
            expires,
            fate: Fate::Pending,
            ended: None,
            reply: Some(tx),
        });
        self.version += 1;
        Ok((rx, expires))
    }

    /// Answers the question whose id is `id`. A person typing at `allow`/`reject` may give
    /// the start of an id instead (see [`Naming`]). Returns the whole id.
    pub fn answer(
        &mut self,
        id: &str,
        naming: Naming,
        decision: Decision,
        by: Who,
        now: SystemTime,
    ) -> Result<String, AnswerRefused> {
        let whole = match naming {
            Naming::Whole if self.find(id).is_some() => id.to_owned(),
            Naming::Whole => return Err(AnswerRefused::Unknown(id.to_owned())),
            Naming::WholeOrStart => self.resolve(id)?,
        };
        let Some(at) = self.pending.iter().position(|e| e.request.id == whole) else {
            let state = self.find(&whole).map_or(Fate::Expired, |e| e.fate);
            return Err(match state {
                Fate::Withdrawn => AnswerRefused::Withdrawn(whole),
                Fate::Expired | Fate::Pending => AnswerRefused::Expired(whole),
                Fate::Decided { .. } => AnswerRefused::Answered {
                    id: whole,
                    state: state.as_str(),
                },
            });
        };
        let mut entry = self.pending.remove(at);
        let delivered = entry
            .reply
            .take()
            .is_some_and(|tx| tx.send(decision).is_ok());
        // The asker's connection is the only way an answer takes effect: when it is gone,
        // the question was withdrawn, whatever was answered.
        entry.fate = if delivered {
            Fate::Decided { decision, by }
        } else {
            Fate::Withdrawn
        };
        self.end(entry, now);
        if delivered {
            Ok(whole)
        } else {
            Err(AnswerRefused::Withdrawn(whole))
        }
    }

    /// The asker hung up: a pending question ends as withdrawn; an ended one stays as it is.
    pub fn withdraw(&mut self, id: &str, now: SystemTime) {
        self.end_pending(id, Fate::Withdrawn, now);
    }

    /// The question's time ran out: a pending question ends as expired.
    pub fn expire(&mut self, id: &str, now: SystemTime) {
        self.end_pending(id, Fate::Expired, now);
    }

    fn end_pending(&mut self, id: &str, fate: Fate, now: SystemTime) {
        if let Some(at) = self.pending.iter().position(|e| e.request.id == id) {
            let mut entry = self.pending.remove(at);
            entry.fate = fate;
            entry.reply = None;
            self.end(entry, now);
        }
    }

    fn end(&mut self, mut entry: Entry, now: SystemTime) {
        entry.ended = Some(now);
        self.ended.push_front(entry);
        self.ended.truncate(MAX_ENDED);
        self.version += 1;
    }

    fn find(&self, id: &str) -> Option<&Entry> {
        self.pending
            .iter()
            .chain(self.ended.iter())
            .find(|e| e.request.id == id)
    }

    /// The one id that is `id` or starts with it. A whole id that is also the start of
    /// another is ambiguous too: an asker that saw a question arrive could otherwise ask
    /// under the first characters of its id and take the answer a person typed for it.
    fn resolve(&self, id: &str) -> Result<String, AnswerRefused> {
        if id.len() < MIN_PREFIX && self.find(id).is_none() {
            return Err(AnswerRefused::Unknown(id.to_owned()));
        }
        let mut matches = self
            .pending
            .iter()
            .chain(self.ended.iter())
            .filter(|e| e.request.id.starts_with(id));
        match (matches.next(), matches.next()) {
            (Some(one), None) => Ok(one.request.id.clone()),
            (Some(_), Some(_)) => Err(AnswerRefused::Ambiguous(id.to_owned())),
            (None, _) => Err(AnswerRefused::Unknown(id.to_owned())),
        }
    }

    /// The board as the panel and the clients see it at `now`.
    pub fn view(&self, now: SystemTime) -> BoardView {
        BoardView {
            version: self.version,
            now: rfc3339(now),
            pending: self.pending.iter().map(|e| e.view(now)).collect(),
            decided: self
                .ended
                .iter()
                .take(SHOWN_ENDED)
                .map(|e| e.view(now))
                .collect(),
        }
    }

    /// One question's view, for the notification command.
    pub fn question(&self, id: &str, now: SystemTime) -> Option<QuestionView> {
        self.find(id).map(|e| e.view(now))
    }
}

impl Entry {
    fn view(&self, now: SystemTime) -> QuestionView {
        let r = &self.request;
        let seconds = |d: Result<Duration, _>| d.map_or(0, |d: Duration| d.as_secs());
        QuestionView {
            id: r.id.clone(),
            state: self.fate.as_str().to_owned(),
            argv: r.command.argv.clone(),
            cwd: r.command.cwd.clone(),
            workspace: r.workspace.clone(),
            standing: r.standing.clone(),
            requested: r.requested.clone(),
            received_at: rfc3339(self.received),
            expires_at: rfc3339(self.expires),
            age_s: seconds(now.duration_since(self.received)),
            expires_in_s: seconds(self.expires.duration_since(now)),
            decided_at: self.ended.map(rfc3339),
            decided_by: match self.fate {
                Fate::Decided { by, .. } => Some(by),
                _ => None,
            },
            shown: Shown {
                command: r
                    .command
                    .argv
                    .iter()
                    .map(|a| neutralise(&shell_quote(a)))
                    .collect::<Vec<_>>()
                    .join(" "),
                cwd: neutralise(&r.command.cwd),
                workspace: neutralise(&r.workspace),
                justification: neutralise(&r.requested.justification),
            },
        }
    }
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::request::CommandLine;

    fn request(id: &str) -> Request {
        Request::new(
            id,
            CommandLine {
                argv: vec!["make".into(), "it's".into()],
                cwd: "/w".into(),
            },
            "/w",
            Standing {
                mode: "read-only".into(),
                approval: "on-request".into(),
                preset: "read-only".into(),
            },
            Requested {
                mode: "workspace-write".into(),
                justification: "build".into(),
            },
            Duration::from_secs(60),
        )
    }

    fn now() -> SystemTime {
        SystemTime::now()
    }

    #[test]
    fn the_first_answer_wins_and_reaches_the_asker() {
        let mut board = Board::default();
        let (mut rx, _) = board.ask(request("aaaaaaaa1"), now()).unwrap();
        assert_eq!(
            board.answer(
                "aaaaaaaa1",
                Naming::WholeOrStart,
                Decision::AllowedOnce,
                Who::Cli,
                now()
            ),
            Ok("aaaaaaaa1".into())
        );
        assert_eq!(rx.try_recv(), Ok(Decision::AllowedOnce));
        for (decision, by) in [
            (Decision::Rejected, Who::Panel),
            (Decision::AllowedOnce, Who::Watch),
        ] {
            assert_eq!(
                board.answer("aaaaaaaa1", Naming::WholeOrStart, decision, by, now()),
                Err(AnswerRefused::Answered {
                    id: "aaaaaaaa1".into(),
                    state: "allowed-once"
                })
            );
        }
        let view = board.view(now());
        assert!(view.pending.is_empty());
        assert_eq!(view.decided[0].state, "allowed-once");
        assert_eq!(view.decided[0].decided_by, Some(Who::Cli));
        assert_eq!(view.decided[0].shown.command, "make 'it'\\''s'");
    }

    #[test]
    fn withdrawn_and_expired_questions_take_no_answer() {
        let mut board = Board::default();
        let (_rx1, _) = board.ask(request("w1"), now()).unwrap();
        let (_rx2, _) = board.ask(request("e1"), now()).unwrap();
        board.withdraw("w1", now());
        board.expire("e1", now());
        // Ending twice, or in another way, changes nothing.
        board.expire("w1", now());
        board.withdraw("e1", now());
        assert_eq!(
            board.answer(
                "w1",
                Naming::WholeOrStart,
                Decision::AllowedOnce,
                Who::Cli,
                now()
            ),
            Err(AnswerRefused::Withdrawn("w1".into()))
        );
        assert_eq!(
            board.answer(
                "e1",
                Naming::WholeOrStart,
                Decision::AllowedOnce,
                Who::Cli,
                now()
            ),
            Err(AnswerRefused::Expired("e1".into()))
        );
        let states: Vec<_> = board
            .view(now())
            .decided
            .into_iter()
            .map(|q| q.state)
            .collect();
        assert_eq!(states, ["expired", "withdrawn"]);
    }

    #[test]
    fn an_answer_whose_asker_is_gone_is_a_withdrawal() {
        let mut board = Board::default();
        let (rx, _) = board.ask(request("gone1"), now()).unwrap();
        drop(rx);
        assert_eq!(
            board.answer(
                "gone1",
                Naming::WholeOrStart,
                Decision::AllowedOnce,
                Who::Panel,
                now()
            ),
            Err(AnswerRefused::Withdrawn("gone1".into()))
        );
        assert_eq!(board.view(now()).decided[0].state, "withdrawn");
    }

    #[test]
    fn ids_are_unique_and_prefixes_must_be_long_and_unambiguous() {
        let mut board = Board::default();
        let _a = board.ask(request("abcdef01"), now()).unwrap();
        let _b = board.ask(request("abcdef02"), now()).unwrap();
        assert!(matches!(
            board.ask(request("abcdef01"), now()),
            Err(AskRefused::RepeatedId(_))
        ));
        let answer = |board: &mut Board, id: &str| {
            board.answer(
                id,
                Naming::WholeOrStart,
                Decision::Rejected,
                Who::Cli,
                now(),
            )
        };
        assert_eq!(
            answer(&mut board, "abcde"),
            Err(AnswerRefused::Unknown("abcde".into()))
        );
        assert_eq!(
            answer(&mut board, "abcdef0"),
            Err(AnswerRefused::Ambiguous("abcdef0".into()))
        );
        assert_eq!(
            answer(&mut board, "zzzzzzzz"),
            Err(AnswerRefused::Unknown("zzzzzzzz".into()))
        );
        assert_eq!(answer(&mut board, "abcdef02"), Ok("abcdef02".into()));
        // Still ambiguous: an ended question keeps its id.
        assert_eq!(
            answer(&mut board, "abcdef0"),
            Err(AnswerRefused::Ambiguous("abcdef0".into()))
        );
        // A question asked under the start of another's id does not take answers typed as
        // that start; named whole (as the panel and `watch` do), each is its own.
        let _c = board.ask(request("abcdef01x"), now()).unwrap();
        assert_eq!(
            answer(&mut board, "abcdef01"),
            Err(AnswerRefused::Ambiguous("abcdef01".into()))
        );
        assert_eq!(
            board.answer(
                "abcdef01",
                Naming::Whole,
                Decision::Rejected,
                Who::Watch,
                now()
            ),
            Ok("abcdef01".into())
        );
    }

    #[test]
    fn malformed_questions_are_refused() {
        let mut board = Board::default();
        let mut bad = request("x");
        bad.kind = "other".into();
        assert!(matches!(board.ask(bad, now()), Err(AskRefused::Invalid(_))));
        let mut bad = request("a b");
        bad.id = "a b".into();
        assert!(matches!(board.ask(bad, now()), Err(AskRefused::Invalid(_))));
        let mut bad = request("y");
        bad.options = vec!["allowed-once".into()];
        assert!(matches!(board.ask(bad, now()), Err(AskRefused::Invalid(_))));
        let mut far = request("z");
        far.expires_at = "2999-01-01T00:00:00Z".into();
        let (_rx, expires) = board.ask(far, now()).unwrap();
        assert!(expires <= now() + MAX_WAIT);
        for n in 1..MAX_PENDING {
            let _ = board.ask(request(&format!("p{n}")), now());
        }
        assert_eq!(
            board.ask(request("one-more"), now()).err(),
            Some(AskRefused::Full)
        );
    }
}
