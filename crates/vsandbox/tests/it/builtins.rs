//! Each of the 19 built-ins against its whole output and exit code, in the fixture
//! project of `support::project` (working directory `/p`).

use crate::support::{check_all, project};

#[test]
fn navigation_pwd_cd_ls() {
    check_all(
        project,
        &[
            ("pwd", "/p\n", 0, ""),
            ("cd src; pwd", "/p/src\n", 0, ""),
            ("cd src && cd .. && pwd", "/p\n", 0, ""),
            ("cd; pwd", "/\n", 0, ""),
            ("cd /nope", "", 1, "cd: /nope: No such file or directory"),
            ("cd a.txt", "", 1, "cd: /p/a.txt: Not a directory"),
            ("cd a b", "", 1, "cd: too many arguments"),
            ("cd src; echo $PWD", "/p/src\n", 0, ""),
            ("ls", "a.txt\nb.txt\nnums\nsrc\n", 0, ""),
            ("ls -a", ".hidden\na.txt\nb.txt\nnums\nsrc\n", 0, ""),
            ("ls src", "lib.rs\nmain.rs\n", 0, ""),
            ("ls -l src", "-         17 lib.rs\n-         13 main.rs\n", 0, ""),
            ("ls -l /", "d          5 p\n", 0, ""),
            ("ls a.txt src", "a.txt\n\nsrc:\nlib.rs\nmain.rs\n", 0, ""),
            ("ls nope", "", 1, "ls: /p/nope: No such file or directory"),
            ("ls -z", "", 1, "ls: unknown option -z"),
        ],
    );
}

#[test]
fn file_content_cat_head_tail_wc_grep() {
    check_all(
        project,
        &[
            ("cat a.txt", "alpha\nbeta\ngamma\n", 0, ""),
            ("cat a.txt b.txt", "alpha\nbeta\ngamma\nBeta Two\n", 0, ""),
            ("cat nope a.txt", "alpha\nbeta\ngamma\n", 1, "cat: /p/nope: No such file or directory"),
            ("cat src", "", 1, "cat: /p/src: Is a directory"),
            ("echo piped | cat", "piped\n", 0, ""),
            ("echo piped | cat - b.txt", "piped\nBeta Two\n", 0, ""),
            ("head -n 2 nums", "1\n2\n", 0, ""),
            ("head -3 nums", "1\n2\n3\n", 0, ""),
            ("head nums", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", 0, ""),
            ("head -n1 a.txt b.txt", "==> a.txt <==\nalpha\n\n==> b.txt <==\nBeta Two\n", 0, ""),
            ("head -n x nums", "", 1, "head: invalid number of lines"),
            ("tail -n 2 nums", "11\n12\n", 0, ""),
            ("tail -2 nums", "11\n12\n", 0, ""),
            ("tail -n +11 nums", "11\n12\n", 0, ""),
            ("tail nums | head -n 1", "3\n", 0, ""),
            ("tail -n 5 b.txt", "Beta Two\n", 0, ""),
            ("wc a.txt", "3 3 17 a.txt\n", 0, ""),
            ("wc -l a.txt b.txt", "3 a.txt\n1 b.txt\n4 total\n", 0, ""),
            ("echo hi | wc -c", "3\n", 0, ""),
            ("echo one two three | wc -w", "3\n", 0, ""),
            ("wc nope", "", 1, "wc: /p/nope: No such file or directory"),
            ("grep beta a.txt", "beta\n", 0, ""),
            ("grep -i beta a.txt b.txt", "a.txt:beta\nb.txt:Beta Two\n", 0, ""),
            ("grep -n gamma a.txt", "3:gamma\n", 0, ""),
            ("grep -v a a.txt", "", 1, ""),
            ("grep -v beta a.txt", "alpha\ngamma\n", 0, ""),
            ("grep -c a a.txt", "3\n", 0, ""),
            ("grep -r beta src", "src/lib.rs:pub fn beta() {}\n", 0, ""),
            ("grep -rl fn", "src/lib.rs\nsrc/main.rs\n", 0, ""),
            ("grep -l beta a.txt b.txt", "a.txt\n", 0, ""),
            ("grep zzz a.txt", "", 1, ""),
            ("grep beta src", "", 1, "grep: /p/src: Is a directory"),
            ("cat a.txt | grep -n mm", "3:gamma\n", 0, ""),
            ("grep 'pub fn' src/lib.rs", "pub fn beta() {}\n", 0, ""),
            ("grep", "", 1, "grep: usage"),
        ],
    );
}

#[test]
fn grep_regular_expressions() {
    check_all(
        project,
        &[
            // Basic regular expressions by default, as grep.
            ("grep 'a$' a.txt", "alpha\nbeta\ngamma\n", 0, ""),
            ("grep '^b' a.txt", "beta\n", 0, ""),
            ("grep 'al.ha' a.txt", "alpha\n", 0, ""),
            ("grep 'm*a$' a.txt", "alpha\nbeta\ngamma\n", 0, ""),
            ("grep 'alpha\\|gamma' a.txt", "alpha\ngamma\n", 0, ""),
            ("grep 'a|b' a.txt", "", 1, ""),
            ("grep 'm\\{2\\}' a.txt", "gamma\n", 0, ""),
            ("grep '[[:upper:]]' b.txt", "Beta Two\n", 0, ""),
            ("grep '[^a-z]' a.txt b.txt", "b.txt:Beta Two\n", 0, ""),
            ("grep '()' src/main.rs", "fn main() {}\n", 0, ""),
            ("grep 'a.b' a.txt", "", 1, ""),
            // -E: extended.
            ("grep -E 'alpha|gamma' a.txt", "alpha\ngamma\n", 0, ""),
            ("grep -E '^(be|ga)' a.txt", "beta\ngamma\n", 0, ""),
            ("grep -E 'm{2}' a.txt", "gamma\n", 0, ""),
            ("grep -E 'x?a+$' a.txt", "alpha\nbeta\ngamma\n", 0, ""),
            ("grep -E '{}' src/main.rs", "fn main() {}\n", 0, ""),
            ("grep -Ec 'a|b' a.txt", "3\n", 0, ""),
            ("grep -E '(' a.txt", "", 1, "grep: invalid pattern"),
            ("grep '[a' a.txt", "", 1, "grep: unmatched ["),
            // -F: fixed strings.
            ("grep -F 'a.b' a.txt", "", 1, ""),
            ("echo 'a.b' | grep -F a.b", "a.b\n", 0, ""),
            ("echo 'x[1]' | grep -F '[1]'", "x[1]\n", 0, ""),
            // -i, -w, -o, -e.
            ("grep -i BETA a.txt b.txt", "a.txt:beta\nb.txt:Beta Two\n", 0, ""),
            ("grep -w Beta b.txt", "Beta Two\n", 0, ""),
            ("grep -w Bet b.txt", "", 1, ""),
            ("grep -o 'a.' a.txt", "al\nam\n", 0, ""),
            ("grep -on 'm' a.txt", "3:m\n3:m\n", 0, ""),
            ("grep -oE '[0-9]+' nums | tail -n 1", "12\n", 0, ""),
            ("grep -e alpha -e gamma a.txt", "alpha\ngamma\n", 0, ""),
            ("grep -ealpha a.txt", "alpha\n", 0, ""),
            ("grep -e", "", 1, "grep: option -e needs an argument"),
            // -r with globs and --include/--exclude.
            ("grep -rE 'fn (main|beta)' .", "./src/lib.rs:pub fn beta() {}\n./src/main.rs:fn main() {}\n", 0, ""),
            ("grep -r --include='*.rs' beta", "src/lib.rs:pub fn beta() {}\n", 0, ""),
            ("grep -r --include '*.txt' -i beta .", "./a.txt:beta\n./b.txt:Beta Two\n", 0, ""),
            ("grep -rl --exclude='l*' fn", "src/main.rs\n", 0, ""),
            ("grep -n fn src/*.rs", "src/lib.rs:1:pub fn beta() {}\nsrc/main.rs:1:fn main() {}\n", 0, ""),
            ("grep -h fn src/*.rs", "pub fn beta() {}\nfn main() {}\n", 0, ""),
            ("grep --colour x", "", 1, "grep: unknown option --colour"),
        ],
    );
}

#[test]
fn grep_patterns_cannot_backtrack_catastrophically() {
    // A backtracking engine takes exponential time for `(a*)*b` or `(a|aa)+$` on a's
    // without a match; the regex crate's automata take linear time.
    let mut sandbox = project();
    sandbox.write_file("/p/big", format!("{}\n", "a".repeat(100_000)).repeat(10).as_bytes()).expect("1 MB");
    let start = std::time::Instant::now();
    for command in ["grep -Ec '(a*)*b' big", "grep -Ec '(a|aa)+c$' big", "grep -c '\\(a*\\)*b' big"] {
        let result = sandbox.execute(command);
        assert_eq!((result.stdout.as_str(), result.exit_code), ("0\n", 1), "{command}: {result:?}");
    }
    assert!(start.elapsed() < std::time::Duration::from_secs(10), "{:?}", start.elapsed());
}

#[test]
fn file_operations_touch_cp_mv_rm() {
    check_all(
        project,
        &[
            ("touch new && cat new && ls", "a.txt\nb.txt\nnew\nnums\nsrc\n", 0, ""),
            ("touch a.txt && cat a.txt", "alpha\nbeta\ngamma\n", 0, ""),
            ("touch nodir/x", "", 1, "touch: /p/nodir/x: No such file or directory"),
            ("touch", "", 1, "touch: missing file operand"),
            ("cp a.txt c.txt && cat c.txt", "alpha\nbeta\ngamma\n", 0, ""),
            ("cp a.txt b.txt && cat b.txt", "alpha\nbeta\ngamma\n", 0, ""),
            ("cp a.txt src && ls src", "a.txt\nlib.rs\nmain.rs\n", 0, ""),
            ("cp a.txt b.txt src && ls src", "a.txt\nb.txt\nlib.rs\nmain.rs\n", 0, ""),
            ("cp a.txt b.txt nums", "", 1, "cp: /p/nums: Not a directory"),
            ("cp src s2", "", 1, "cp: -r not specified; omitting directory /p/src"),
            ("cp -r src s2 && ls s2 && cat s2/main.rs", "lib.rs\nmain.rs\nfn main() {}\n", 0, ""),
            ("mkdir d && cp -r src d && find d", "d\nd/src\nd/src/lib.rs\nd/src/main.rs\n", 0, ""),
            ("cp -r src src/inner", "", 1, "cannot move or copy a directory into itself"),
            ("cp a.txt a.txt", "", 1, "are the same file"),
            ("cp nope x", "", 1, "cp: /p/nope: No such file or directory"),
            ("cp a.txt", "", 1, "cp: missing destination operand"),
            ("mv a.txt z.txt && ls", "b.txt\nnums\nsrc\nz.txt\n", 0, ""),
            ("mv src/main.rs . && ls src && cat main.rs", "lib.rs\nfn main() {}\n", 0, ""),
            ("mv src lib && ls lib", "lib.rs\nmain.rs\n", 0, ""),
            ("mv src src/deeper", "", 1, "cannot move or copy a directory into itself"),
            ("mv a.txt b.txt && cat b.txt", "alpha\nbeta\ngamma\n", 0, ""),
            ("mv nope x", "", 1, "mv: /p/nope: No such file or directory"),
            ("rm a.txt && ls", "b.txt\nnums\nsrc\n", 0, ""),
            ("rm src", "", 1, "rm: /p/src: Is a directory"),
            ("rm -r src && ls", "a.txt\nb.txt\nnums\n", 0, ""),
            ("rm -rf src nope && ls", "a.txt\nb.txt\nnums\n", 0, ""),
            ("rm nope", "", 1, "rm: /p/nope: No such file or directory"),
            ("rm -f nope", "", 0, ""),
            ("rm -r /", "", 1, "rm: refusing to remove /"),
            ("rm -r /p", "", 1, "it holds the working directory"),
            ("rm", "", 1, "rm: missing operand"),
        ],
    );
}

#[test]
fn directories_mkdir_find() {
    check_all(
        project,
        &[
            (
                "mkdir d && ls -l",
                "-         17 a.txt\n-          9 b.txt\nd          0 d\n-         27 nums\nd          2 src\n",
                0,
                "",
            ),
            ("mkdir d/e/f", "", 1, "mkdir: /p/d/e/f: No such file or directory"),
            ("mkdir -p d/e/f && find d", "d\nd/e\nd/e/f\n", 0, ""),
            ("mkdir src", "", 1, "mkdir: /p/src: File exists"),
            ("mkdir -p src", "", 0, ""),
            ("mkdir -p a.txt/x", "", 1, "Not a directory"),
            ("mkdir", "", 1, "mkdir: missing operand"),
            ("find src", "src\nsrc/lib.rs\nsrc/main.rs\n", 0, ""),
            ("find . -name '*.rs'", "./src/lib.rs\n./src/main.rs\n", 0, ""),
            ("find -type d", ".\n./src\n", 0, ""),
            ("find / -maxdepth 1", "/\n/p\n", 0, ""),
            ("find /p/src -type f -name 'l?b.*'", "/p/src/lib.rs\n", 0, ""),
            ("find nope", "", 1, "find: /p/nope: No such file or directory"),
            ("find -type x", "", 1, "find: unknown -type x"),
            ("find -name", "", 1, "find: missing argument to -name"),
        ],
    );
}

#[test]
fn output_environment_utility() {
    check_all(
        project,
        &[
            ("echo hello world", "hello world\n", 0, ""),
            ("echo", "\n", 0, ""),
            ("echo -n x", "x", 0, ""),
            ("echo -e 'a\\tb\\nc'", "a\tb\nc\n", 0, ""),
            ("echo 'a\\tb'", "a\\tb\n", 0, ""),
            ("echo -x", "-x\n", 0, ""),
            ("env", "HOME=/\nPATH=/bin:/usr/bin\nPWD=/p\n", 0, ""),
            ("env ls", "", 1, "env: only printing the environment is supported"),
            ("export A=1 B && env", "A=1\nB=\nHOME=/\nPATH=/bin:/usr/bin\nPWD=/p\n", 0, ""),
            (
                "export A='x \"y\" $z'; export",
                "export A=\"x \\\"y\\\" \\$z\"\nexport HOME=\"/\"\nexport PATH=\"/bin:/usr/bin\"\nexport PWD=\"/p\"\n",
                0,
                "",
            ),
            ("export 1A=x", "", 1, "export: \"1A=x\": not a valid identifier"),
            ("export A=1; export A; echo $A", "1\n", 0, ""),
            ("clear", "\x1b[H\x1b[2J", 0, ""),
            ("help cat", "cat: print files\nusage: cat [FILE...]   (no FILE or -: the piped input)\n", 0, ""),
            ("help nope", "", 1, "help: nope: no such command"),
            ("nope", "", 127, "nope: command not found"),
            ("nope; echo $?", "127\n", 0, "nope: command not found"),
        ],
    );
}

#[test]
fn help_lists_every_builtin_once_in_order() {
    let mut sandbox = project();
    let result = sandbox.execute("help");
    let names: Vec<&str> = result.stdout.lines().map(|line| line.split_whitespace().next().unwrap_or("")).collect();
    assert_eq!(
        names,
        [
            "pwd", "cd", "ls", "cat", "head", "tail", "wc", "grep", "touch", "cp", "mv", "rm", "mkdir", "find", "echo",
            "env", "export", "clear", "help"
        ]
    );
    assert_eq!(vsandbox::builtins::BUILTINS.len(), 19);
}
