//! The control endpoint (`--control ADDR`): the fault switched over HTTP,
//! for a script that cannot send signals (another host's, a container's).
//! `POST /fault/on` and `POST /fault/off` turn it (idempotently), `GET
//! /fault` says where it is; each answers `{"faulted":BOOL,"fault":"SPEC"}`.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, header};

use super::switch::Switch;
use crate::net::endpoint::{Answer, Endpoint, EndpointError, Limits, not_allowed, text};

/// The path that says where the fault is.
pub const FAULT_PATH: &str = "/fault";

/// A running control endpoint; it stops when dropped.
pub struct ControlEndpoint(Endpoint);

impl ControlEndpoint {
    /// Binds `addr` and serves the control of `switch` there from now on.
    /// Must be called inside a tokio runtime.
    pub fn serve(addr: SocketAddr, switch: Arc<Switch>) -> Result<ControlEndpoint, EndpointError> {
        Endpoint::serve("--control", addr, Limits::default(), move |req| {
            respond(req, &switch)
        })
        .map(ControlEndpoint)
    }

    /// The URL of the fault's state.
    pub fn url(&self) -> String {
        format!("http://{}{FAULT_PATH}", self.0.local_addr())
    }
}

/// The answer to one request.
fn respond(req: &Request<Incoming>, switch: &Switch) -> Answer {
    let path = req.uri().path();
    let turn = match path.strip_prefix(FAULT_PATH) {
        Some("") => None,
        Some("/on") => Some(true),
        Some("/off") => Some(false),
        _ => {
            return text(
                StatusCode::NOT_FOUND,
                "not found: GET /fault, POST /fault/on, POST /fault/off\n",
            );
        }
    };
    match (turn, req.method()) {
        (None, &Method::GET | &Method::HEAD) => {}
        (None, _) => return not_allowed("GET, HEAD"),
        (Some(on), &Method::POST) => {
            switch.turn(on);
        }
        (Some(_), _) => return not_allowed("POST"),
    }
    let body = serde_json::json!({
        "faulted": switch.is_on(),
        "fault": switch.fault().to_string(),
    });
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}
