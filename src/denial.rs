//! The marker envelope (DESIGN §5): one line `sandgate: denied {JSON}` on stderr. This
//! module renders sandgate's own refusals and notes; kernel-observed denials build on the
//! same envelope.

use serde_json::{json, Map, Value};

use crate::policy::Mode;

/// Renders one marker line for a refusal or note of `kind`, with extra fields.
pub fn marker(kind: &str, mode: Option<Mode>, message: &str, extra: Map<String, Value>) -> String {
    let mut body = json!({
        "v": 1,
        "kind": kind,
        "mode": mode.map(Mode::as_str),
        "message": message,
    });
    if let Value::Object(fields) = &mut body {
        fields.extend(extra);
    }
    format!("sandgate: denied {body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_is_one_line_of_json_after_the_prefix() -> Result<(), serde_json::Error> {
        let line = marker("usage", Some(Mode::ReadOnly), "bad\nthing", Map::new());
        assert!(!line.contains('\n'));
        let body: Value = serde_json::from_str(line.trim_start_matches("sandgate: denied "))?;
        assert_eq!(body["kind"], "usage");
        assert_eq!(body["mode"], "read-only");
        assert_eq!(body["v"], 1);
        Ok(())
    }
}
