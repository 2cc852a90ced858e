//! Errors of the HTTP API in OpenAI's shape (`{"error": {message, type, param,
//! code}}`), shared by the request checks (`api`) and the image decoding (`images`).

use axum::http::StatusCode;
use serde_json::{Value, json};

/// An error in OpenAI's shape, with its HTTP status.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// `invalid_request_error`, `not_found_error`, `server_error`.
    pub kind: &'static str,
    /// The request field at fault (`messages[0].role`).
    pub param: Option<String>,
    /// `context_length_exceeded`, `model_not_found`, ...
    pub code: Option<&'static str>,
}

impl ApiError {
    /// A 400 naming the field at fault.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: Some(param.into()),
            code: None,
        }
    }

    /// A 500 (the model failed).
    pub fn server(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
            kind: "server_error",
            param: None,
            code: None,
        }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({"error": {
            "message": crate::util::sanitize::clean_line(&self.message),
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

impl axum::response::IntoResponse for ApiError {
    fn into_response(self) -> axum::response::Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}
