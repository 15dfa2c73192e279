//! Settings of a user's dev container that defeat a guard: the Docker socket, home
//! credentials mounted in, secret-looking host variables passed through, a privileged
//! container, the host's network or PID namespace, an agent working as root, and the
//! Features that bring the socket or a privileged container (Docker outside of Docker,
//! Docker in Docker). Pure:
//! it reads the parsed `devcontainer.json` and the text of its compose files.

use serde_json::Value;

/// Home directories whose contents are credentials.
const CREDENTIAL_PATHS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".config/gcloud",
    ".azure",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
];

/// Words that make an environment variable's name look like a secret.
const SECRET_WORDS: &[&str] = &["TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH", "PAT", "COOKIE"];

/// Every risk in the document and the compose files, one line each: where, and why.
pub fn risks(document: &Value, compose: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    let mut add = |line: String| {
        if !found.contains(&line) {
            found.push(line);
        }
    };
    let mounts: Vec<String> = document["mounts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|mount| match mount {
            Value::String(text) => text.clone(),
            other => format!("source={}", other["source"].as_str().unwrap_or_default()),
        })
        .chain(document["workspaceMount"].as_str().map(str::to_owned))
        .collect();
    for mount in &mounts {
        mount_risks(&format!("mount {mount:?}"), mount, &mut add);
    }
    let run_args: Vec<&str> = document["runArgs"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    for (idx, arg) in run_args.iter().enumerate() {
        let next = run_args.get(idx + 1).copied().unwrap_or_default();
        let joined = match arg.split_once('=') {
            Some(_) => (*arg).to_owned(),
            None => format!("{arg}={next}"),
        };
        let (flag, value) = joined.split_once('=').unwrap_or((&joined, ""));
        match flag {
            "--privileged" => {
                add("runArgs --privileged: the agent can reach every device and disable the firewall".into())
            }
            "--network" | "--net" if value == "host" => add(format!(
                "runArgs {joined}: the host's network, where the container's firewall rules would change the host's"
            )),
            "--pid" | "--ipc" | "--userns" | "--uts" if value == "host" => {
                add(format!("runArgs {joined}: shares a namespace with the host"))
            }
            "--cap-add"
                if ["ALL", "SYS_ADMIN", "SYS_PTRACE", "SYS_MODULE"].contains(&value.to_uppercase().as_str()) =>
            {
                add(format!("runArgs {joined}: a capability that escapes the guard rails"))
            }
            "-v" | "--volume" | "--mount" => mount_risks(&format!("runArgs {joined}"), value, &mut add),
            _ => {}
        }
    }
    // Features that bring the same as the settings above: refused as those are.
    for id in document["features"].as_object().into_iter().flatten().map(|(id, _)| id) {
        let name = id.rsplit('/').next().unwrap_or_default().split([':', '@']).next().unwrap_or_default();
        match name {
            "docker-outside-of-docker" | "docker-from-docker" => add(format!(
                "feature {id:?}: mounts the host's Docker socket, which gives whoever is inside root on the host"
            )),
            "docker-in-docker" => add(format!(
                "feature {id:?}: runs the container privileged (for its own Docker engine): the agent can reach every \
                 device and disable the firewall"
            )),
            _ => {}
        }
    }
    if document["privileged"] == Value::Bool(true) {
        add("\"privileged\": true: the agent can reach every device and disable the firewall".into());
    }
    for key in ["remoteUser", "containerUser"] {
        let user = document[key].as_str().unwrap_or_default();
        let is_agent = key == "remoteUser" || document.get("remoteUser").is_none();
        if is_agent && (user == "root" || user == "0") {
            add(format!("\"{key}\": \"{user}\": the agent would work as root and could turn the firewall off"));
        }
    }
    let mut strings = Vec::new();
    collect_strings(document, &mut strings);
    for text in strings {
        for name in local_env_names(text) {
            if looks_secret(&name) {
                add(format!(
                    "${{localEnv:{name}}}: passes a secret of the host's environment into the container, where the agent reads it"
                ));
            }
        }
    }
    for (file, text) in compose {
        for line in text.lines().map(str::trim).filter(|line| !line.starts_with('#')) {
            let compact: String = line.chars().filter(|c| !c.is_whitespace() && *c != '"' && *c != '\'').collect();
            let at = format!("{file}: {line}");
            if compact == "privileged:true" {
                add(format!("{at}: the agent can reach every device and disable the firewall"));
            }
            if compact == "network_mode:host" {
                add(format!("{at}: the host's network, where the container's firewall rules would change the host's"));
            }
            if ["pid:host", "ipc:host", "userns_mode:host"].contains(&compact.as_str()) {
                add(format!("{at}: shares a namespace with the host"));
            }
            if compact.starts_with('-') || compact.starts_with("source:") {
                mount_risks(&at, line, &mut add);
            }
            for name in compose_env_names(line) {
                if looks_secret(&name) {
                    add(format!("{at}: passes the host's ${name} into the container, where the agent reads it"));
                }
            }
        }
    }
    found
}

fn mount_risks(at: &str, mount: &str, add: &mut impl FnMut(String)) {
    if mount.contains("docker.sock") {
        add(format!("{at}: the Docker socket gives whoever is inside root on the host"));
    }
    let source = mount
        .split(',')
        .find_map(|part| part.strip_prefix("source=").or_else(|| part.strip_prefix("src=")))
        .unwrap_or_else(|| mount.trim_start_matches('-').trim().split(':').next().unwrap_or_default());
    for credential in CREDENTIAL_PATHS {
        let hit = source
            .split('/')
            .collect::<Vec<_>>()
            .windows(credential.split('/').count())
            .any(|window| window.join("/") == *credential);
        if hit {
            add(format!("{at}: mounts the host's {credential} (credentials) where the agent reads it"));
        }
    }
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|item| collect_strings(item, out)),
        Value::Object(map) => map.values().for_each(|item| collect_strings(item, out)),
        _ => {}
    }
}

fn local_env_names(text: &str) -> Vec<String> {
    text.split("${localEnv:").skip(1).filter_map(|rest| rest.split(['}', ':']).next()).map(str::to_owned).collect()
}

/// `${NAME}` and `$NAME` interpolations of a compose line.
fn compose_env_names(line: &str) -> Vec<String> {
    let mut names = Vec::new();
    for rest in line.split('$').skip(1) {
        let rest = rest.strip_prefix('{').unwrap_or(rest);
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            names.push(name);
        }
    }
    names
}

fn looks_secret(name: &str) -> bool {
    let upper = name.to_uppercase();
    upper.split(|c: char| !c.is_ascii_alphanumeric()).any(|word| SECRET_WORDS.contains(&word))
        || ["TOKEN", "SECRET", "PASSWORD", "APIKEY"].iter().any(|word| upper.contains(word))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_risky_setting_is_named_and_its_harmless_neighbour_is_not() {
        let document = json!({
            "mounts": [
                "source=/var/run/docker.sock,target=/var/run/docker.sock,type=bind",
                "source=${localEnv:HOME}/.ssh,target=/home/node/.ssh,type=bind,readonly",
                { "source": "${localEnv:HOME}/.aws", "target": "/aws", "type": "bind" },
                "source=my-cache,target=/cache,type=volume",
                "source=${localEnv:HOME}/.sshd-notes,target=/notes,type=bind"
            ],
            "runArgs": ["--network", "host", "--cap-add=NET_ADMIN", "--pid=host", "--add-host=x:127.0.0.2"],
            "privileged": true,
            "remoteUser": "root",
            "containerEnv": {
                "GH": "${localEnv:GITHUB_TOKEN}",
                "EDITOR": "${localEnv:EDITOR}",
                "K": "${localEnv:OPENAI_API_KEY:default}"
            }
        });
        let compose = vec![(
            "docker-compose.yml".to_owned(),
            "services:\n  app:\n    privileged: true\n    network_mode: \"host\"\n    volumes:\n      - /var/run/docker.sock:/var/run/docker.sock\n      - ..:/workspace:cached\n    environment:\n      - NPM_TOKEN=${NPM_TOKEN}\n      - TZ=${TZ}\n".to_owned(),
        )];
        let got = risks(&document, &compose);
        let want = [
            "mount \"source=/var/run/docker.sock,target=/var/run/docker.sock,type=bind\": the Docker socket gives whoever is inside root on the host",
            "mount \"source=${localEnv:HOME}/.ssh,target=/home/node/.ssh,type=bind,readonly\": mounts the host's .ssh (credentials) where the agent reads it",
            "mount \"source=${localEnv:HOME}/.aws\": mounts the host's .aws (credentials) where the agent reads it",
            "runArgs --network=host: the host's network, where the container's firewall rules would change the host's",
            "runArgs --pid=host: shares a namespace with the host",
            "\"privileged\": true: the agent can reach every device and disable the firewall",
            "\"remoteUser\": \"root\": the agent would work as root and could turn the firewall off",
            "${localEnv:GITHUB_TOKEN}: passes a secret of the host's environment into the container, where the agent reads it",
            "${localEnv:OPENAI_API_KEY}: passes a secret of the host's environment into the container, where the agent reads it",
            "docker-compose.yml: privileged: true: the agent can reach every device and disable the firewall",
            "docker-compose.yml: network_mode: \"host\": the host's network, where the container's firewall rules would change the host's",
            "docker-compose.yml: - /var/run/docker.sock:/var/run/docker.sock: the Docker socket gives whoever is inside root on the host",
            "docker-compose.yml: - NPM_TOKEN=${NPM_TOKEN}: passes the host's $NPM_TOKEN into the container, where the agent reads it",
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_plain_configuration_has_no_risk() {
        let document = json!({
            "image": "mcr.microsoft.com/devcontainers/base:bookworm",
            "remoteUser": "vscode",
            "containerUser": "root",
            "mounts": ["source=node_modules,target=${containerWorkspaceFolder}/node_modules,type=volume"],
            "containerEnv": { "TZ": "${localEnv:TZ}" },
            "runArgs": ["--cap-add=NET_ADMIN", "--network=my-net"]
        });
        assert_eq!(risks(&document, &[]), Vec::<String>::new());
    }

    /// The Docker Features are the socket mount and `privileged` by another name;
    /// other Features (and a local one of the same folder name's prefix) pass.
    #[test]
    fn the_docker_features_are_refused_like_the_settings_they_bring() {
        let document = json!({
            "image": "mcr.microsoft.com/devcontainers/base:bookworm",
            "features": {
                "ghcr.io/devcontainers/features/docker-outside-of-docker:1": {},
                "ghcr.io/devcontainers/features/docker-in-docker@sha256:0123": {"moby": false},
                "ghcr.io/devcontainers/features/docker-from-docker:1": {},
                "ghcr.io/devcontainers/features/common-utils:2": {},
                "ghcr.io/devcontainers/features/node:1": {},
                "./docker-in-docker-notes": {},
                "./agent-sandbox": {}
            }
        });
        assert_eq!(
            risks(&document, &[]),
            [
                "feature \"ghcr.io/devcontainers/features/docker-from-docker:1\": mounts the host's Docker socket, which gives whoever is inside root on the host",
                "feature \"ghcr.io/devcontainers/features/docker-in-docker@sha256:0123\": runs the container privileged (for its own Docker engine): the agent can reach every device and disable the firewall",
                "feature \"ghcr.io/devcontainers/features/docker-outside-of-docker:1\": mounts the host's Docker socket, which gives whoever is inside root on the host",
            ]
        );
    }
}
