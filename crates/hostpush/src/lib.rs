//! Pushes carried out by agent-sandbox outside the sandbox. Inside `exec`, the git
//! guard turns `git push` into a request on the runtime directory's push socket
//! ([`protocol`]); the `exec` process on the host answers it ([`service`]): it decides
//! from the request alone and the facts of the start what git command it would run
//! ([`plan`], pure), then runs the user's own git in the project's repository, with the
//! user's environment and credentials, and the hook guard (`agent-sandbox hook
//! pre-push` in its host mode) as the only pre-push hook. That hook checks every new
//! commit in a fresh sandbox; the sandbox itself never holds push credentials.

pub mod adopt;
pub mod checks;
pub mod home;
pub mod hook;
pub mod mirror;
pub mod plan;
pub mod protocol;
pub mod redirect;
pub mod service;
pub mod verify;

pub use plan::{plan, PushCommand, PushFacts, Refusal};
