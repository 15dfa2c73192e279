//! Seed 002's Docker sandbox lifecycle without VS Code: `init`, `build`, `build-base`,
//! `start`, `stop`, `restart`, `shell`, `show-run`, `checkout` (branch mode), `list`,
//! `volume`, `codex-init-config`, `codex-logout`.
//!
//! `names` (pure) spells every container, image and volume name from the workspace
//! path; `plan` (pure) turns a workspace and its settings into one [`plan::ContainerPlan`],
//! the whole container create request, which is also what `show-run` prints as a
//! `docker run` command; `context` holds the build contexts (the base image's, built
//! into the binary, and the per-repo one); `codex` decides the Codex volume's files;
//! `lifecycle` is each command (facts, decision, engine); `engine` is the only module
//! that talks to Docker (bollard, a current-thread tokio runtime) and carries plans out,
//! at the [`endpoint::Endpoint`] the docker CLI would use, local or remote (TLS, ssh:
//! `transport`); `workspace` reads what a container takes from the workspace itself
//! (its protected paths, `devcontainer init`'s options).

pub mod codex;
pub mod context;
pub mod endpoint;
pub mod engine;
pub mod lifecycle;
pub mod names;
pub mod plan;
pub mod transport;
pub mod workspace;
