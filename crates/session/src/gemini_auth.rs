//! Gemini CLI's sign-in method on the first try. Gemini CLI runs only once its user
//! settings name a method (`security.auth.selectedType`): its first interactive run asks
//! and writes the answer there, but that file is host-executed (hooks, MCP servers) and
//! read-only inside (`agent_guard`), so the answer was lost, and a "Sign in with Google"
//! without a browser restarts Gemini CLI, which asked again, forever. The session's
//! read-only copy of the user's settings (the one that carries `tools.*`) names the
//! method instead when the user's names none: the one Gemini CLI itself takes from the
//! environment in a headless run, else signing in with Google (its own default). The
//! login it then makes lands in `~/.gemini`, which is kept, so the next session is still
//! logged in. Only the environment the sandbox is given counts: a `GEMINI_API_KEY` the
//! env policy drops selects nothing.
//!
//! From Gemini CLI 0.61's `getAuthTypeFromEnv` (packages/core/src/core/contentGenerator.ts),
//! `validateNonInteractiveAuth` (packages/cli/src/validateNonInterActiveAuth.ts) and
//! `validateAuthMethod` (packages/cli/src/config/auth.ts).
//! Pure: the caller passes the user's settings (parsed) and the sandbox's environment.

use std::ffi::OsString;

use serde_json::Value;

/// Signing in with Google (Gemini CLI's `AuthType.LOGIN_WITH_GOOGLE`).
pub(crate) const GOOGLE: &str = "oauth-personal";

/// The method the session's copy names, or `None` when the user's settings decide
/// (they name one, or an external sign-in, or they are not a JSON object).
pub(crate) fn sign_in(user_settings: &Value, env: &[(OsString, OsString)]) -> Option<&'static str> {
    let auth = &user_settings["security"]["auth"];
    if !user_settings.is_object()
        || auth["selectedType"].as_str().is_some_and(|chosen| !chosen.is_empty())
        || auth["useExternal"] == true
        || auth["enforcedType"].is_string()
    {
        return None;
    }
    let var = |name: &str| env.iter().find(|(var, _)| var == name).map(|(_, value)| value.to_string_lossy());
    let is_true = |name: &str| var(name).is_some_and(|value| value == "true");
    // Gemini CLI's own order, without its `GOOGLE_GEMINI_BASE_URL` → "gateway", which its
    // own check of the method refuses ("Invalid auth method selected."): a base URL is
    // where the key's requests go, not a way to sign in.
    Some(if is_true("GOOGLE_GENAI_USE_GCA") {
        GOOGLE
    } else if is_true("GOOGLE_GENAI_USE_VERTEXAI") {
        "vertex-ai"
    } else if var("GEMINI_API_KEY").is_some_and(|key| !key.is_empty()) {
        "gemini-api-key"
    } else if is_true("CLOUD_SHELL") || is_true("GEMINI_CLI_USE_COMPUTE_ADC") {
        "compute-default-credentials"
    } else {
        GOOGLE
    })
}

/// `document` (a settings object) naming `method` as the selected sign-in.
pub(crate) fn select(document: &mut Value, method: &str) {
    let Some(object) = document.as_object_mut() else { return };
    let security = object.entry("security").or_insert_with(|| Value::Object(Default::default()));
    if !security.is_object() {
        *security = Value::Object(Default::default());
    }
    let auth = security.as_object_mut().expect("made an object").entry("auth").or_insert_with(Default::default);
    if !auth.is_object() {
        *auth = Value::Object(Default::default());
    }
    auth.as_object_mut().expect("made an object").insert("selectedType".into(), Value::String(method.into()));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Each case: the user's settings, the sandbox's environment, the method the copy
    /// names.
    #[test]
    fn the_copy_names_the_method_gemini_would_take_else_google() {
        let none: &[(&str, &str)] = &[];
        type Case<'a> = (Value, &'a [(&'a str, &'a str)], Option<&'a str>);
        let cases: &[Case<'_>] = &[
            (json!({}), none, Some(GOOGLE)),
            (json!({"security": {"auth": {"selectedType": "gemini-api-key"}}}), none, None),
            (json!({"security": {"auth": {"selectedType": "oauth-personal"}}}), &[("GEMINI_API_KEY", "k")], None),
            (json!({"security": {"auth": {"selectedType": ""}}}), none, Some(GOOGLE)),
            (json!({"security": {"auth": {"useExternal": true}}}), none, None),
            (json!({"security": {"auth": {"enforcedType": "vertex-ai"}}}), none, None),
            (json!({"ui": {"theme": "x"}}), &[("GEMINI_API_KEY", "k")], Some("gemini-api-key")),
            (json!({}), &[("GEMINI_API_KEY", "")], Some(GOOGLE)),
            (json!({}), &[("GEMINI_API_KEY", "k"), ("GOOGLE_GENAI_USE_GCA", "true")], Some(GOOGLE)),
            (json!({}), &[("GEMINI_API_KEY", "k"), ("GOOGLE_GENAI_USE_VERTEXAI", "true")], Some("vertex-ai")),
            (json!({}), &[("GEMINI_API_KEY", "k"), ("GOOGLE_GENAI_USE_VERTEXAI", "1")], Some("gemini-api-key")),
            (json!({}), &[("GEMINI_API_KEY", "k"), ("GOOGLE_GEMINI_BASE_URL", "http://x")], Some("gemini-api-key")),
            (json!({}), &[("GOOGLE_GEMINI_BASE_URL", "http://x")], Some(GOOGLE)),
            (json!({}), &[("CLOUD_SHELL", "true")], Some("compute-default-credentials")),
            (json!({}), &[("GEMINI_CLI_USE_COMPUTE_ADC", "true")], Some("compute-default-credentials")),
            (json!([]), none, None),
        ];
        for (settings, env, expected) in cases {
            let env: Vec<(OsString, OsString)> = env.iter().map(|(name, value)| (name.into(), value.into())).collect();
            assert_eq!(sign_in(settings, &env), *expected, "{settings} {env:?}");
        }
    }

    #[test]
    fn select_keeps_the_rest_of_the_settings() {
        let mut document = json!({"security": {"folderTrust": {"enabled": true}}, "tools": {"exclude": ["x"]}});
        select(&mut document, GOOGLE);
        assert_eq!(
            document,
            json!({"security": {"folderTrust": {"enabled": true}, "auth": {"selectedType": "oauth-personal"}},
                   "tools": {"exclude": ["x"]}})
        );
        let mut document = json!({"security": "odd"});
        select(&mut document, "gemini-api-key");
        assert_eq!(document, json!({"security": {"auth": {"selectedType": "gemini-api-key"}}}));
    }
}
