//! Real-kernel tests for `seccomp::deny_terminal_injection`: each test installs the
//! program in a child process (`PR_SET_NO_NEW_PRIVS` + `PR_SET_SECCOMP` in a `pre_exec`
//! hook, or bubblewrap's `--seccomp FD`) and has that child try the ioctls on a fresh
//! pty, reporting `RESULT=ok` or `RESULT=<errno>` on stdout. Children are either
//! `/usr/bin/python3` or this test binary re-executed with `SECCOMP_TEST_CHILD` set, for
//! raw syscalls python cannot express cleanly. Where the kernel would refuse the
//! ioctl anyway (TIOCSTI needs CAP_SYS_ADMIN on a pty that is not the controlling
//! terminal), a control run without the filter shows the ioctl really works as root.
#![cfg(target_os = "linux")]

use std::ffi::c_ulong;
use std::io::{self, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

const PYTHON: &str = "/usr/bin/python3";
const BWRAP: &str = "/usr/bin/bwrap";
/// Set (to a scenario name) when this binary is re-executed as a test child.
const CHILD_ENV: &str = "SECCOMP_TEST_CHILD";
const CHILD_ENTRY: &str = "re_exec_child_entry";

const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
const TIOCGWINSZ: u64 = 0x5413;

// --- installing the filter -------------------------------------------------------------

/// The serialized program, parsed back into the kernel's struct.
fn filter_instructions() -> Vec<libc::sock_filter> {
    let bytes = seccomp::deny_terminal_injection();
    assert_eq!(bytes.len() % std::mem::size_of::<libc::sock_filter>(), 0);
    bytes
        .chunks_exact(8)
        .map(|c| libc::sock_filter {
            code: u16::from_ne_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect()
}

/// Make `cmd` install the filter in the child between fork and exec.
fn with_filter(cmd: &mut Command) -> &mut Command {
    let mut insns = filter_instructions();
    let len = u16::try_from(insns.len()).expect("program length fits sock_fprog.len");
    // SAFETY: the hook allocates nothing and only calls prctl, which is async-signal-safe;
    // `insns` is owned by the closure and outlives the prctl call that reads it.
    unsafe {
        cmd.pre_exec(move || {
            let one: c_ulong = 1;
            let zero: c_ulong = 0;
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, one, zero, zero, zero) != 0 {
                return Err(io::Error::last_os_error());
            }
            let prog = libc::sock_fprog { len, filter: insns.as_mut_ptr() };
            let mode = libc::SECCOMP_MODE_FILTER as c_ulong;
            let prog_ptr: *const libc::sock_fprog = &prog;
            if libc::prctl(libc::PR_SET_SECCOMP, mode, prog_ptr) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

// --- running children --------------------------------------------------------------------

/// The `RESULT=` line of a successful child: `ok` or an errno number.
fn outcome(output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "child failed ({}):\nstdout: {stdout}\nstderr: {stderr}", output.status);
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("RESULT="))
        .unwrap_or_else(|| panic!("no RESULT line:\nstdout: {stdout}\nstderr: {stderr}"))
        .to_owned()
}

/// Python: open a pty pair and issue `ioctl(slave, request, buf)`.
fn pty_ioctl_script(request: u64) -> String {
    format!(
        r#"
import fcntl, os
master, slave = os.openpty()
try:
    fcntl.ioctl(slave, {request:#x}, b"x" + bytes(7))
    print("RESULT=ok")
except OSError as e:
    print(f"RESULT={{e.errno}}")
"#
    )
}

fn python_pty_ioctl(request: u64, filtered: bool) -> String {
    let mut cmd = Command::new(PYTHON);
    cmd.arg("-c").arg(pty_ioctl_script(request));
    if filtered {
        with_filter(&mut cmd);
    }
    outcome(cmd.output().expect("spawn python3"))
}

/// Re-execute this test binary as a child running `scenario` (see `re_exec_child_entry`).
fn rust_child(scenario: &str, filtered: bool) -> String {
    let exe = std::env::current_exe().expect("current test binary");
    let mut cmd = Command::new(exe);
    cmd.args([CHILD_ENTRY, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD_ENV, scenario);
    if filtered {
        with_filter(&mut cmd);
    }
    outcome(cmd.output().expect("re-exec test binary"))
}

fn eperm() -> String {
    libc::EPERM.to_string()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

// --- tests ---------------------------------------------------------------------------------

#[test]
fn tiocsti_is_refused_under_the_filter() {
    assert_eq!(python_pty_ioctl(TIOCSTI, true), eperm());
}

#[test]
fn tiocsti_works_without_the_filter_when_root_so_the_refusal_is_the_filters() {
    if !is_root() {
        eprintln!("skipped: not root, so the kernel itself refuses TIOCSTI on a pty that is not the controlling tty (EPERM); the control run proves nothing");
        return;
    }
    assert_eq!(python_pty_ioctl(TIOCSTI, false), "ok");
}

#[test]
fn harmless_ioctl_and_python_keep_working_under_the_filter() {
    assert_eq!(python_pty_ioctl(TIOCGWINSZ, true), "ok");
    let mut cmd = Command::new(PYTHON);
    cmd.arg("-c").arg("import sys; print('RESULT=' + sys.version.split()[0])");
    with_filter(&mut cmd);
    assert!(outcome(cmd.output().expect("spawn python3")).starts_with('3'));
}

#[test]
fn tioclinux_is_refused_with_eperm_instead_of_the_ptys_own_error() {
    let unfiltered = python_pty_ioctl(TIOCLINUX, false);
    assert_ne!(unfiltered, eperm(), "control: a pty does not implement TIOCLINUX");
    assert_ne!(unfiltered, "ok", "control: a pty does not implement TIOCLINUX");
    assert_eq!(python_pty_ioctl(TIOCLINUX, true), eperm());
}

#[test]
fn tiocsti_with_high_bits_set_in_the_request_is_refused() {
    if is_root() {
        // Control: the kernel truncates the request to 32 bits, so this *is* TIOCSTI.
        assert_eq!(rust_child("ioctl-high-bits", false), "ok");
    } else {
        eprintln!("note: not root, skipping the control run (the kernel refuses TIOCSTI anyway)");
    }
    assert_eq!(rust_child("ioctl-high-bits", true), eperm());
}

#[cfg(target_arch = "x86_64")]
#[test]
fn tiocsti_through_the_i386_int_0x80_entry_is_refused() {
    let unfiltered = rust_child("int80-ioctl", false);
    if unfiltered == libc::ENOSYS.to_string() {
        eprintln!("skipped: this kernel has no ia32 emulation (int 0x80 gives ENOSYS)");
        return;
    }
    if is_root() {
        assert_eq!(unfiltered, "ok", "control: i386 ioctl(TIOCSTI) as root");
    }
    assert_eq!(rust_child("int80-ioctl", true), eperm());
}

#[cfg(target_arch = "x86_64")]
#[test]
fn tiocsti_through_the_x32_ioctl_number_is_refused() {
    // Without the filter this is ENOSYS on kernels without x32 (the common case) and
    // TIOCSTI where x32 is enabled; seccomp runs before that dispatch either way.
    let unfiltered = rust_child("x32-ioctl", false);
    eprintln!("x32 ioctl(TIOCSTI) without the filter: {unfiltered}");
    assert_eq!(rust_child("x32-ioctl", true), eperm());
}

#[test]
fn bubblewrap_accepts_the_program_and_refuses_tiocsti_inside() {
    use std::fs::File;
    use std::io::{Seek, SeekFrom};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    if !std::path::Path::new(BWRAP).exists() {
        assert!(std::env::var_os("CI").is_none(), "{BWRAP} is required in CI");
        eprintln!("skipped: {BWRAP} not installed");
        return;
    }
    // The program in an anonymous file, rewound so bwrap reads it from the start.
    // SAFETY: memfd_create with a valid C string; the result is checked before use.
    let raw = unsafe { libc::memfd_create(c"seccomp-test".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(raw >= 0, "memfd_create: {}", io::Error::last_os_error());
    // SAFETY: `raw` is a freshly created fd that nothing else owns.
    let mut file = File::from(unsafe { OwnedFd::from_raw_fd(raw) });
    file.write_all(&seccomp::deny_terminal_injection()).expect("write program");
    file.seek(SeekFrom::Start(0)).expect("rewind");
    let fd = file.as_raw_fd();

    let bwrap = |seccomp: bool| {
        let mut cmd = Command::new(BWRAP);
        cmd.args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
        if is_root() {
            // bwrap drops capabilities; keep CAP_SYS_ADMIN so TIOCSTI would work.
            cmd.args(["--cap-add", "CAP_SYS_ADMIN"]);
        }
        if seccomp {
            cmd.arg("--seccomp").arg(fd.to_string());
            // SAFETY: fcntl on an fd we own; async-signal-safe, no allocation.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        cmd.args(["--", PYTHON, "-c", &pty_ioctl_script(TIOCSTI)]);
        cmd.output().expect("spawn bwrap")
    };

    let control = bwrap(false);
    if !control.status.success() {
        assert!(std::env::var_os("CI").is_none(), "bwrap must run in CI");
        eprintln!(
            "skipped: bwrap cannot run here without --seccomp either: {}",
            String::from_utf8_lossy(&control.stderr)
        );
        return;
    }
    if is_root() {
        assert_eq!(outcome(control), "ok", "control: TIOCSTI inside bwrap with CAP_SYS_ADMIN");
    }
    assert_eq!(outcome(bwrap(true)), eperm());
}

// --- the re-executed child -----------------------------------------------------------------

/// Entry point of the re-executed child; a no-op in a normal test run.
#[test]
fn re_exec_child_entry() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else {
        return;
    };
    let result = match run_scenario(&scenario) {
        Ok(()) => "ok".to_owned(),
        Err(errno) => errno.to_string(),
    };
    let mut stdout = io::stdout();
    // Leading newline: libtest has already printed "test <name> ... " on this line.
    writeln!(stdout, "\nRESULT={result}").expect("write result");
    stdout.flush().expect("flush result");
    std::process::exit(0);
}

/// Run one raw syscall scenario on a fresh pty; `Err(errno)` if it failed.
fn run_scenario(scenario: &str) -> Result<(), i32> {
    let slave = open_pty_slave();
    match scenario {
        "ioctl-high-bits" => {
            let byte = b'x';
            let request: u64 = (1 << 32) | TIOCSTI;
            // SAFETY: ioctl on our own pty with a pointer to a live byte.
            let ret = unsafe { libc::syscall(libc::SYS_ioctl, slave, request, std::ptr::from_ref(&byte)) };
            if ret == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error().raw_os_error().unwrap_or(-1))
            }
        }
        #[cfg(target_arch = "x86_64")]
        "x32-ioctl" => {
            let byte = b'x';
            let nr: libc::c_long = 0x4000_0000 + 514;
            // SAFETY: as above; on kernels without x32 this just fails with ENOSYS.
            let ret = unsafe { libc::syscall(nr, slave, TIOCSTI, std::ptr::from_ref(&byte)) };
            if ret == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error().raw_os_error().unwrap_or(-1))
            }
        }
        #[cfg(target_arch = "x86_64")]
        "int80-ioctl" => int80_tiocsti(slave),
        other => panic!("unknown scenario {other}"),
    }
}

/// Open a new pty pair and return the slave fd (both fds live until the child exits).
fn open_pty_slave() -> libc::c_int {
    // SAFETY: plain libc calls on fds we own, each result checked.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(master >= 0, "posix_openpt: {}", io::Error::last_os_error());
        assert_eq!(libc::grantpt(master), 0, "grantpt");
        assert_eq!(libc::unlockpt(master), 0, "unlockpt");
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0, "ptsname_r");
        let slave = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        assert!(slave >= 0, "open pty slave: {}", io::Error::last_os_error());
        slave
    }
}

/// `ioctl(fd, TIOCSTI, &'x')` through the i386 `int 0x80` entry (AUDIT_ARCH_I386, nr 54).
#[cfg(target_arch = "x86_64")]
fn int80_tiocsti(fd: libc::c_int) -> Result<(), i32> {
    // The i386 ABI only passes 32-bit pointers, so the byte must live below 4 GiB.
    // SAFETY: anonymous private mapping; checked before use.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
            -1,
            0,
        )
    };
    assert_ne!(page, libc::MAP_FAILED, "mmap: {}", io::Error::last_os_error());
    let addr = u32::try_from(page as usize).expect("MAP_32BIT gives an address below 4 GiB");
    // SAFETY: `page` is a fresh writable mapping.
    unsafe { page.cast::<u8>().write(b'x') };
    let fd = u64::try_from(fd).expect("fd is non-negative");
    let ret: i32;
    // SAFETY: int 0x80 with eax=54 (ioctl), ebx=fd, ecx=request, edx=pointer. rbx is
    // reserved by LLVM, so the fd is swapped in and out around the call; the kernel
    // preserves everything but eax and zeroes r8-r11 on this path.
    unsafe {
        std::arch::asm!(
            "xchg {fd}, rbx",
            "int 0x80",
            "xchg {fd}, rbx",
            fd = inout(reg) fd => _,
            inlateout("eax") 54i32 => ret,
            in("ecx") TIOCSTI as u32,
            in("edx") addr,
            out("r8") _,
            out("r9") _,
            out("r10") _,
            out("r11") _,
        );
    }
    if ret == 0 {
        Ok(())
    } else {
        Err(-ret)
    }
}
