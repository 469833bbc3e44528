//! The status a server's gRPC answer carries: how the model's end of a
//! request (served, refused by a defence, failed by a failing backend, a
//! tier's call inward ended) becomes a gRPC code, a message and a
//! pushback. Both engines' servers answer gRPC with it, so a gRPC storm
//! sees the same codes on either.

use super::grpc::Code;
pub use super::server::Overload;
use super::service::Refusal;
use super::tier::TierAnswer;

/// How a request left the server, whatever the protocol it came by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Served by the model (and, as a tier, its call inward succeeded).
    Served,
    /// Turned away by a defence, dropped from the queue, or failed by a
    /// failing backend.
    Refused(Refusal),
    /// As a tier: served, but its call inward ended in `TierAnswer`
    /// (never [`TierAnswer::Ok`], which is [`Fate::Served`]).
    Inward(TierAnswer),
    /// As a tier: the caller's deadline had passed before the work began.
    DeadlinePassed,
    /// The server is shutting down: the model has gone.
    ShuttingDown,
}

/// A gRPC status: its code, the message sent with it (ASCII without `%`,
/// so `grpc-message` needs no percent-encoding), and whether it carries
/// the server's pushback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The code (`grpc-status`).
    pub code: Code,
    /// What went wrong (`grpc-message`), empty for OK.
    pub message: &'static str,
    /// Whether `grpc-retry-pushback-ms` goes with it, where the server
    /// sends one: with every refusal for overload, as the HTTP answer has
    /// it, never with a failure or an error.
    pub pushback: bool,
}

/// The status of a request that left the server as `fate`, on a server
/// answering overload with `overload` whose failing backend fails with
/// HTTP status `fail_status`.
///
/// A failing backend's status is mapped as gRPC clients map an HTTP
/// status without `grpc-status` (`Code::from_http`): 503, 502, 504 and
/// 429 become `UNAVAILABLE`, 500 `UNKNOWN`, 400 `INTERNAL`, so the same
/// failure is retried, or not, whether it reaches a gRPC client as HTTP
/// or as gRPC. A tier's failed call inward is `UNAVAILABLE` (its HTTP
/// answer, 503, maps so), its timed-out one `DEADLINE_EXCEEDED`.
pub fn status(fate: Fate, overload: Overload, fail_status: u16) -> Status {
    let overloaded = |message| Status {
        code: overload.code(),
        message,
        pushback: true,
    };
    let error = |code, message| Status {
        code,
        message,
        pushback: false,
    };
    match fate {
        Fate::Served => error(Code::Ok, ""),
        Fate::Refused(Refusal::Failed) => {
            error(Code::from_http(fail_status), "failed (--fail-rate)")
        }
        Fate::Refused(Refusal::Shed) => overloaded("overloaded, retry later"),
        Fate::Refused(Refusal::Full) => overloaded("overloaded: queue full"),
        Fate::Refused(Refusal::Limited) => overloaded("overloaded: concurrency limit"),
        Fate::Refused(Refusal::Rejected) => overloaded("overloaded: denied by admission control"),
        Fate::Refused(Refusal::Expired) => overloaded("overloaded: timed out in the queue"),
        Fate::Refused(Refusal::Unaccepted) => overloaded("overloaded: backlog full"),
        Fate::Inward(TierAnswer::Ok) => error(Code::Ok, ""),
        Fate::Inward(TierAnswer::Unavailable) => error(Code::Unavailable, "the call inward failed"),
        Fate::Inward(TierAnswer::GatewayTimeout) => {
            error(Code::DeadlineExceeded, "the call inward timed out")
        }
        Fate::DeadlinePassed => error(Code::DeadlineExceeded, "deadline exceeded"),
        Fate::ShuttingDown => error(Code::Unavailable, "shutting down"),
    }
}

/// The message a served call is answered with: for the health check
/// (`grpc.health.v1.Health/Check`) `SERVING`, for any other method an
/// empty message (every method is the same model behind it).
pub fn served_message(path: &str) -> &'static [u8] {
    let health = path.strip_prefix('/') == Some(super::grpc::HEALTH_CHECK);
    if health { &super::grpc::SERVING } else { &[] }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overload_is_answered_with_the_code_asked_for_and_pushback() {
        let overloads = [
            Refusal::Shed,
            Refusal::Full,
            Refusal::Limited,
            Refusal::Rejected,
            Refusal::Expired,
        ];
        for why in overloads {
            let s = status(Fate::Refused(why), Overload::Unavailable, 500);
            assert_eq!((s.code.number(), s.pushback), (14, true), "{why:?}");
            let s = status(Fate::Refused(why), Overload::ResourceExhausted, 500);
            assert_eq!((s.code.number(), s.pushback), (8, true), "{why:?}");
            assert!(s.message.starts_with("overloaded"), "{why:?}");
        }
    }

    #[test]
    fn a_failing_backend_maps_as_an_http_status_does_without_pushback() {
        for (http, code) in [(500, 2), (503, 14), (429, 14), (400, 13), (404, 12)] {
            let s = status(Fate::Refused(Refusal::Failed), Overload::Unavailable, http);
            assert_eq!((s.code.number(), s.pushback), (code, false), "{http}");
        }
    }

    #[test]
    fn served_is_ok_and_a_tiers_end_says_what_became_of_its_call() {
        let ok = status(Fate::Served, Overload::ResourceExhausted, 500);
        assert_eq!((ok.code, ok.message, ok.pushback), (Code::Ok, "", false));
        let of = |fate| status(fate, Overload::ResourceExhausted, 500).code;
        assert_eq!(of(Fate::Inward(TierAnswer::Ok)), Code::Ok);
        assert_eq!(of(Fate::Inward(TierAnswer::Unavailable)), Code::Unavailable);
        assert_eq!(
            of(Fate::Inward(TierAnswer::GatewayTimeout)),
            Code::DeadlineExceeded
        );
        assert_eq!(of(Fate::DeadlinePassed), Code::DeadlineExceeded);
        assert_eq!(of(Fate::ShuttingDown), Code::Unavailable);
    }

    #[test]
    fn messages_need_no_percent_encoding() {
        let fates = [
            Fate::Refused(Refusal::Failed),
            Fate::Refused(Refusal::Unaccepted),
            Fate::Inward(TierAnswer::GatewayTimeout),
            Fate::ShuttingDown,
        ];
        for fate in fates {
            let m = status(fate, Overload::Unavailable, 500).message;
            assert!(!m.is_empty() && m.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'%'));
        }
    }

    #[test]
    fn the_health_check_is_serving_and_other_methods_empty() {
        assert_eq!(
            served_message("/grpc.health.v1.Health/Check"),
            &[0x08, 0x01]
        );
        assert!(served_message("/grpc.health.v1.Health/Watch").is_empty());
        assert!(served_message("/a.B/C").is_empty());
    }
}
