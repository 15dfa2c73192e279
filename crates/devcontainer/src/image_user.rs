//! The user an image runs the agent as, as the devcontainer CLI picks it when
//! devcontainer.json names none: the last `remoteUser` of the image's
//! `devcontainer.metadata` label (what common-utils images carry: `vscode`), else its
//! last `containerUser`, else the image's `User` (for a Dockerfile, its final stage's
//! last `USER`), else root. Pure: [`query`] says what to look at, the caller runs
//! `docker image inspect`, [`decide`] reads its answer. Anything not known here (an
//! image not pulled, `FROM ${ARG}`) is `None`, and `init` then writes no `remoteUser`.

use std::path::Path;

use serde_json::Value;

/// What to look at for a devcontainer.json that names no user: the image to inspect
/// (`image`, or the Dockerfile's final base) and the Dockerfile's own `USER`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub image: String,
    pub dockerfile_user: Option<String>,
}

/// `None` when there is nothing to learn (the file names `remoteUser` or a non-root
/// `containerUser`, or is compose or agent-sandbox's template) or no way to learn it.
/// `read` gives a file by its path relative to the workspace.
pub fn query(read: &dyn Fn(&Path) -> Option<String>) -> Option<Query> {
    let json_rel = Path::new(".devcontainer/devcontainer.json");
    let document: Value = jsonc_parser::parse_to_serde_value::<Value>(&read(json_rel)?, &Default::default()).ok()?;
    let named = |key: &str| document[key].as_str().is_some_and(|user| !["root", "0", ""].contains(&user));
    if document.get("remoteUser").is_some() || named("containerUser") || document.get("dockerComposeFile").is_some() {
        return None;
    }
    if let Some(image) = document["image"].as_str() {
        return Some(Query { image: image.to_owned(), dockerfile_user: None });
    }
    let dockerfile = document["build"]["dockerfile"].as_str().or(document["dockerFile"].as_str())?;
    let text = read(&Path::new(".devcontainer").join(dockerfile))?;
    let (image, dockerfile_user) = final_stage(&text)?;
    Some(Query { image, dockerfile_user })
}

/// The user, from `docker image inspect --format '{{json .Config}}'` of the query's
/// image (`None`: the image is not here).
pub fn decide(query: &Query, config: Option<&str>) -> Option<String> {
    let config: Value = serde_json::from_str(config?).ok()?;
    let metadata: Vec<Value> = match config["Labels"]["devcontainer.metadata"].as_str() {
        Some(text) => match serde_json::from_str(text).ok()? {
            Value::Array(entries) => entries,
            entry => vec![entry],
        },
        None => Vec::new(),
    };
    let last = |key: &str| metadata.iter().rev().find_map(|entry| entry[key].as_str().map(str::to_owned));
    let image_user = config["User"].as_str().filter(|user| !user.is_empty()).map(str::to_owned);
    let user = last("remoteUser")
        .or_else(|| last("containerUser"))
        .or_else(|| query.dockerfile_user.clone())
        .or(image_user)
        .unwrap_or_else(|| "root".into());
    // `USER name:group`; a bare uid has no name to find its home by.
    let name = user.split(':').next().unwrap_or_default();
    (!name.is_empty() && !name.bytes().all(|b| b.is_ascii_digit()) || name == "0").then(|| name.to_owned())
}

/// A Dockerfile's final base image (through the stages it builds on) and the last
/// `USER` on the way; `None` when a build argument decides either.
fn final_stage(text: &str) -> Option<(String, Option<String>)> {
    // (base, stage name, last USER)
    let mut stages: Vec<(String, Option<String>, Option<String>)> = Vec::new();
    let joined = text.replace("\\\n", " ");
    for line in joined.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        let instruction = words.next().unwrap_or_default().to_ascii_uppercase();
        let args: Vec<&str> = words.collect();
        match instruction.as_str() {
            "FROM" => {
                let args: Vec<&str> = args.into_iter().filter(|arg| !arg.starts_with("--")).collect();
                let base = (*args.first()?).to_owned();
                let name = match args.get(1) {
                    Some(word) if word.eq_ignore_ascii_case("as") => args.get(2).map(|name| name.to_lowercase()),
                    _ => None,
                };
                stages.push((base, name, None));
            }
            "USER" => {
                let stage = stages.last_mut()?;
                stage.2 = Some((*args.first()?).to_owned());
            }
            _ => {}
        }
    }
    let (mut base, _, mut user) = stages.last()?.clone();
    for _ in 0..stages.len() {
        let Some((next_base, _, next_user)) =
            stages.iter().find(|(_, name, _)| name.as_deref() == Some(base.to_lowercase().as_str()))
        else {
            break;
        };
        user = user.or_else(|| next_user.clone());
        base = next_base.clone();
    }
    if base.contains('$') || user.as_deref().is_some_and(|user| user.contains('$')) {
        return None;
    }
    Some((base, user))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query_for(json: &str, dockerfile: Option<&str>) -> Option<Query> {
        query(&|path: &Path| match path.to_str()? {
            ".devcontainer/devcontainer.json" => Some(json.to_owned()),
            ".devcontainer/Dockerfile" => dockerfile.map(str::to_owned),
            _ => None,
        })
    }

    #[test]
    fn what_to_look_at_for_each_kind_of_file() {
        let image = |image: &str| Some(Query { image: image.into(), dockerfile_user: None });
        assert_eq!(
            query_for(r#"{"image": "mcr.microsoft.com/devcontainers/base:bookworm"}"#, None),
            image("mcr.microsoft.com/devcontainers/base:bookworm")
        );
        assert_eq!(query_for(r#"{"image": "x", "containerUser": "root"}"#, None), image("x"));
        assert_eq!(query_for(r#"{"image": "x", "remoteUser": "dev"}"#, None), None);
        assert_eq!(query_for(r#"{"image": "x", "containerUser": "dev"}"#, None), None);
        assert_eq!(query_for(r#"{"dockerComposeFile": "c.yml", "service": "app"}"#, None), None);
        let build = r#"{"build": {"dockerfile": "Dockerfile"}}"#;
        let stages = "FROM --platform=linux/amd64 node:20 AS deps\nUSER node\nRUN npm ci\n\
                      FROM deps as final\nRUN \\\n  true\n";
        assert_eq!(
            query_for(build, Some(stages)),
            Some(Query { image: "node:20".into(), dockerfile_user: Some("node".into()) })
        );
        assert_eq!(
            query_for(build, Some("FROM mcr.microsoft.com/devcontainers/python:3\nUSER root\nRUN x\n")),
            Some(Query {
                image: "mcr.microsoft.com/devcontainers/python:3".into(),
                dockerfile_user: Some("root".into())
            })
        );
        assert_eq!(query_for(build, Some("ARG BASE\nFROM ${BASE}\n")), None);
        assert_eq!(query_for(build, None), None);
    }

    #[test]
    fn the_user_is_the_one_the_cli_would_pick() {
        let image = Query { image: "x".into(), dockerfile_user: None };
        let labelled = r#"{"User": "", "Labels": {"devcontainer.metadata": "[{\"id\":\"ghcr.io/devcontainers/features/common-utils:2\"},{\"remoteUser\":\"vscode\"}]"}}"#;
        assert_eq!(decide(&image, Some(labelled)), Some("vscode".into()));
        // The metadata's remoteUser wins over the Dockerfile's USER, as in the CLI.
        let root_user = Query { image: "x".into(), dockerfile_user: Some("root".into()) };
        assert_eq!(decide(&root_user, Some(labelled)), Some("vscode".into()));
        assert_eq!(decide(&root_user, Some(r#"{"User": "node", "Labels": null}"#)), Some("root".into()));
        assert_eq!(decide(&image, Some(r#"{"User": "node:node", "Labels": null}"#)), Some("node".into()));
        assert_eq!(decide(&image, Some(r#"{"User": "", "Labels": {}}"#)), Some("root".into()));
        let contained = r#"{"User": "", "Labels": {"devcontainer.metadata": "{\"containerUser\":\"dev\"}"}}"#;
        assert_eq!(decide(&image, Some(contained)), Some("dev".into()));
        // A bare uid names no home; an image not pulled says nothing.
        assert_eq!(decide(&image, Some(r#"{"User": "1000", "Labels": null}"#)), None);
        assert_eq!(decide(&image, None), None);
    }
}
