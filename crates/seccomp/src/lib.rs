//! Seccomp filter that stops a sandboxed agent from injecting keystrokes into the
//! user's terminal. `deny_terminal_injection` returns a classic-BPF program, already
//! serialized as the kernel's `struct sock_filter` array, that makes `ioctl(TIOCSTI)`
//! (push bytes into a tty's input queue) and `ioctl(TIOCLINUX)` (which includes
//! console paste-selection) fail with `EPERM`, and allows every other syscall. The bytes
//! are meant to be handed to bubblewrap via `--seccomp FD`; the crate has no dependencies
//! and never installs the filter itself.

/// Size of one serialized `struct sock_filter`: `u16 code, u8 jt, u8 jf, u32 k`.
const INSN_SIZE: usize = 8;

// --- classic BPF opcodes (linux/filter.h, linux/bpf_common.h) ---------------------

const BPF_LD: u16 = 0x00;
const BPF_JMP: u16 = 0x05;
const BPF_RET: u16 = 0x06;
const BPF_W: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_JEQ: u16 = 0x10;
const BPF_K: u16 = 0x00;

/// `A = *(u32 *)(seccomp_data + k)`.
const LD_W_ABS: u16 = BPF_LD | BPF_W | BPF_ABS;
/// `if A == k goto +jt else goto +jf` (offsets count from the next instruction).
const JMP_JEQ_K: u16 = BPF_JMP | BPF_JEQ | BPF_K;
/// `return k`.
const RET_K: u16 = BPF_RET | BPF_K;

// --- seccomp return values (linux/seccomp.h) and errno ----------------------------

const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// `EPERM` is 1 on every Linux architecture.
const EPERM: u32 = 1;
const RET_EPERM: u32 = SECCOMP_RET_ERRNO | EPERM;

// --- struct seccomp_data layout (linux/seccomp.h) ---------------------------------
//
// struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; };

const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARGS: u32 = 16;
/// Offset of the low 32 bits of `args[1]` (the ioctl request). The data is in the
/// running kernel's byte order, i.e. the byte order this crate is compiled for.
const OFFSET_ARG1_LOW: u32 = if cfg!(target_endian = "little") { OFFSET_ARGS + 8 } else { OFFSET_ARGS + 8 + 4 };

// --- audit architectures (linux/audit.h) and their ioctl syscall numbers ----------

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
/// 32-bit ARM EABI, reachable from aarch64 userspace on CPUs with AArch32 EL0.
const AUDIT_ARCH_ARM: u32 = 0x4000_0028;

const NR_X86_64_IOCTL: u32 = 16;
/// x32 syscalls arrive with `AUDIT_ARCH_X86_64` and this bit set in `nr`.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// x32's own ioctl entry (compat argument handling).
const NR_X32_IOCTL: u32 = X32_SYSCALL_BIT | 514;
/// The x86_64 number with the x32 bit set. Current kernels answer `ENOSYS` because
/// ioctl is a 64-bit-only entry in the x32 table; denied anyway so that no kernel
/// version can turn it into a bypass.
const NR_X32_IOCTL_LEGACY: u32 = X32_SYSCALL_BIT | NR_X86_64_IOCTL;
/// i386 (int 0x80 / sysenter from any x86 process) and 32-bit ARM EABI share 54.
const NR_I386_ARM_IOCTL: u32 = 54;
const NR_AARCH64_IOCTL: u32 = 29;

// --- the ioctl requests we refuse ---------------------------------------------------
//
// These are the asm-generic values used by x86, arm and arm64 (mips, powerpc, sparc
// differ, but those architectures are not matched below).

/// Fake input: push one byte into the terminal's input queue.
const TIOCSTI: u32 = 0x5412;
/// Linux console multiplexer; subcommand TIOCL_PASTESEL pastes the selection as input.
const TIOCLINUX: u32 = 0x541C;

// --- instruction helpers ------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

/// `A = seccomp_data[offset..offset + 4]`.
const fn load(offset: u32) -> Insn {
    Insn { code: LD_W_ABS, jt: 0, jf: 0, k: offset }
}

/// `return action`.
const fn ret(action: u32) -> Insn {
    Insn { code: RET_K, jt: 0, jf: 0, k: action }
}

/// Instruction number `at`: `if A == value goto target`, otherwise fall through.
/// Classic BPF only jumps forward, by at most 255; violations fail at compile time.
const fn jeq_goto(at: usize, value: u32, target: usize) -> Insn {
    assert!(target > at, "classic BPF can only jump forward");
    let skip = target - at - 1;
    assert!(skip <= u8::MAX as usize, "jump too far for an 8-bit offset");
    Insn { code: JMP_JEQ_K, jt: skip as u8, jf: 0, k: value }
}

// --- the program --------------------------------------------------------------------
//
// Jump targets (instruction indices in PROGRAM; checked at compile time below).

const L_X86_64: usize = 6;
const L_I386_ARM: usize = 11;
const L_AARCH64: usize = 14;
const L_CHECK_REQUEST: usize = 17;
const L_DENY: usize = 21;

const PROGRAM: [Insn; 22] = [
    // 0..=5: dispatch on the calling convention. The arch must be checked before
    // the syscall number, because the same number means different syscalls on
    // different ABIs (54 is ioctl on i386 but setsockopt on x86_64).
    //
    // Any other arch is allowed. The kernel only reports ABIs it can run, and on the
    // hosts we target (x86_64, aarch64) every such ABI is matched here, so the
    // fall-through is unreachable there. On other hosts we know neither the syscall
    // numbers nor (on mips/powerpc/sparc) the ioctl values, and killing would make the
    // sandbox unusable; the filter then degrades to a no-op, and protection must come
    // from the kernel's `dev.tty.legacy_tiocsti = 0` and the sandbox's new session.
    load(OFFSET_ARCH),                          // 0
    jeq_goto(1, AUDIT_ARCH_X86_64, L_X86_64),   // 1
    jeq_goto(2, AUDIT_ARCH_I386, L_I386_ARM),   // 2
    jeq_goto(3, AUDIT_ARCH_AARCH64, L_AARCH64), // 3
    jeq_goto(4, AUDIT_ARCH_ARM, L_I386_ARM),    // 4
    ret(SECCOMP_RET_ALLOW),                     // 5
    // 6..=10: x86_64, including x32 syscalls (same arch value, X32 bit in nr).
    load(OFFSET_NR),                                   // 6
    jeq_goto(7, NR_X86_64_IOCTL, L_CHECK_REQUEST),     // 7
    jeq_goto(8, NR_X32_IOCTL, L_CHECK_REQUEST),        // 8
    jeq_goto(9, NR_X32_IOCTL_LEGACY, L_CHECK_REQUEST), // 9
    ret(SECCOMP_RET_ALLOW),                            // 10
    // 11..=13: i386 and 32-bit ARM, where ioctl is 54 on both.
    load(OFFSET_NR),                                  // 11
    jeq_goto(12, NR_I386_ARM_IOCTL, L_CHECK_REQUEST), // 12
    ret(SECCOMP_RET_ALLOW),                           // 13
    // 14..=16: aarch64.
    load(OFFSET_NR),                                 // 14
    jeq_goto(15, NR_AARCH64_IOCTL, L_CHECK_REQUEST), // 15
    ret(SECCOMP_RET_ALLOW),                          // 16
    // 17..=20: it is an ioctl; look at the request. Only the low 32 bits are
    // compared, because the kernel truncates the request to `unsigned int`: comparing
    // all 64 bits lets 0x1_0000_5412 through as TIOCSTI (CVE-2019-10063 in flatpak).
    // The 32-bit ABIs likewise only use the low word, so the same load serves them.
    load(OFFSET_ARG1_LOW),           // 17
    jeq_goto(18, TIOCSTI, L_DENY),   // 18
    jeq_goto(19, TIOCLINUX, L_DENY), // 19
    ret(SECCOMP_RET_ALLOW),          // 20
    // 21: refuse.
    ret(RET_EPERM), // 21
];

// The labels must point at the block they name.
const _: () = {
    assert!(PROGRAM[L_X86_64].code == LD_W_ABS && PROGRAM[L_X86_64].k == OFFSET_NR);
    assert!(PROGRAM[L_I386_ARM].code == LD_W_ABS && PROGRAM[L_I386_ARM].k == OFFSET_NR);
    assert!(PROGRAM[L_AARCH64].code == LD_W_ABS && PROGRAM[L_AARCH64].k == OFFSET_NR);
    assert!(PROGRAM[L_CHECK_REQUEST].code == LD_W_ABS);
    assert!(PROGRAM[L_CHECK_REQUEST].k == OFFSET_ARG1_LOW);
    assert!(PROGRAM[L_DENY].code == RET_K && PROGRAM[L_DENY].k == RET_EPERM);
    assert!(L_DENY == PROGRAM.len() - 1);
};

/// A classic-BPF seccomp program, serialized as the kernel's `struct sock_filter` array
/// (8 bytes per instruction, native endian) — the format bubblewrap reads from `--seccomp FD`.
///
/// The program returns `SECCOMP_RET_ERRNO | EPERM` for `ioctl(fd, TIOCSTI, ..)` and
/// `ioctl(fd, TIOCLINUX, ..)` on x86_64 (including x32 and i386 syscalls), aarch64 and
/// 32-bit ARM, comparing only the low 32 bits of the request like the kernel does, and
/// `SECCOMP_RET_ALLOW` for everything else.
pub fn deny_terminal_injection() -> Vec<u8> {
    let mut bytes = Vec::with_capacity(PROGRAM.len() * INSN_SIZE);
    for insn in PROGRAM {
        bytes.extend_from_slice(&insn.code.to_ne_bytes());
        bytes.push(insn.jt);
        bytes.push(insn.jf);
        bytes.extend_from_slice(&insn.k.to_ne_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    //! Checks of the program's shape and of its decisions for ABIs this machine cannot
    //! run (aarch64, arm, x32 variants). The decisions are evaluated by a tiny
    //! interpreter of the three opcodes the program uses; the kernel tests in
    //! `tests/kernel.rs` are the real proof on the host architecture.

    use super::*;

    /// Parse the serialized bytes back into instructions.
    fn decode(bytes: &[u8]) -> Vec<Insn> {
        assert_eq!(bytes.len() % INSN_SIZE, 0);
        bytes
            .chunks_exact(INSN_SIZE)
            .map(|c| Insn {
                code: u16::from_ne_bytes([c[0], c[1]]),
                jt: c[2],
                jf: c[3],
                k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect()
    }

    /// Build a native-endian `struct seccomp_data`.
    fn seccomp_data(arch: u32, nr: u32, args: [u64; 6]) -> Vec<u8> {
        let mut data = Vec::new();
        data.extend_from_slice(&nr.to_ne_bytes());
        data.extend_from_slice(&arch.to_ne_bytes());
        data.extend_from_slice(&0u64.to_ne_bytes());
        for arg in args {
            data.extend_from_slice(&arg.to_ne_bytes());
        }
        data
    }

    /// Run the program on one syscall and return the seccomp action.
    fn run(arch: u32, nr: u32, request: u64) -> u32 {
        let program = decode(&deny_terminal_injection());
        let data = seccomp_data(arch, nr, [3, request, 0, 0, 0, 0]);
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let insn = program[pc];
            pc += 1;
            match insn.code {
                LD_W_ABS => {
                    let at = insn.k as usize;
                    acc = u32::from_ne_bytes(data[at..at + 4].try_into().expect("4 bytes"));
                }
                JMP_JEQ_K => {
                    pc += usize::from(if acc == insn.k { insn.jt } else { insn.jf });
                }
                RET_K => return insn.k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    #[test]
    fn constants_match_the_kernel_headers_as_exposed_by_libc() {
        assert_eq!(u32::from(LD_W_ABS), libc::BPF_LD | libc::BPF_W | libc::BPF_ABS);
        assert_eq!(u32::from(JMP_JEQ_K), libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K);
        assert_eq!(u32::from(RET_K), libc::BPF_RET | libc::BPF_K);
        assert_eq!(SECCOMP_RET_ALLOW, libc::SECCOMP_RET_ALLOW);
        assert_eq!(SECCOMP_RET_ERRNO, libc::SECCOMP_RET_ERRNO);
        assert_eq!(EPERM, libc::EPERM as u32);
        assert_eq!(INSN_SIZE, std::mem::size_of::<libc::sock_filter>());
        assert_eq!(OFFSET_NR as usize, std::mem::offset_of!(libc::seccomp_data, nr));
        assert_eq!(OFFSET_ARCH as usize, std::mem::offset_of!(libc::seccomp_data, arch));
        assert_eq!(OFFSET_ARGS as usize, std::mem::offset_of!(libc::seccomp_data, args));
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "arm"))]
        {
            assert_eq!(TIOCSTI, libc::TIOCSTI as u32);
            assert_eq!(TIOCLINUX, libc::TIOCLINUX as u32);
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(i64::from(NR_X86_64_IOCTL), libc::SYS_ioctl);
        #[cfg(target_arch = "aarch64")]
        assert_eq!(i64::from(NR_AARCH64_IOCTL), libc::SYS_ioctl);
    }

    #[test]
    fn program_is_whole_instructions_ending_in_a_return() {
        let program = decode(&deny_terminal_injection());
        assert_eq!(program, PROGRAM);
        assert_eq!(program.last().map(|i| i.code), Some(RET_K));
        for (at, insn) in program.iter().enumerate() {
            if insn.code == JMP_JEQ_K {
                assert!(at + 1 + usize::from(insn.jt.max(insn.jf)) < program.len());
            }
        }
    }

    #[test]
    fn tiocsti_and_tioclinux_are_refused_on_every_handled_abi() {
        let ioctls = [
            (AUDIT_ARCH_X86_64, NR_X86_64_IOCTL),
            (AUDIT_ARCH_X86_64, NR_X32_IOCTL),
            (AUDIT_ARCH_X86_64, NR_X32_IOCTL_LEGACY),
            (AUDIT_ARCH_I386, NR_I386_ARM_IOCTL),
            (AUDIT_ARCH_AARCH64, NR_AARCH64_IOCTL),
            (AUDIT_ARCH_ARM, NR_I386_ARM_IOCTL),
        ];
        for (arch, nr) in ioctls {
            for request in [TIOCSTI, TIOCLINUX] {
                let request = u64::from(request);
                assert_eq!(run(arch, nr, request), RET_EPERM, "{arch:#x}/{nr:#x}");
                // The kernel truncates the request to 32 bits, so high bits must not matter.
                let high = request | 0xFFFF_FFFF_0000_0000;
                assert_eq!(run(arch, nr, high), RET_EPERM, "{arch:#x}/{nr:#x} high bits");
                assert_eq!(run(arch, nr, request | 1 << 32), RET_EPERM);
            }
            // Other requests on the same fd stay allowed.
            assert_eq!(run(arch, nr, 0x5413 /* TIOCGWINSZ */), SECCOMP_RET_ALLOW);
            assert_eq!(run(arch, nr, 0x5412_0000), SECCOMP_RET_ALLOW);
        }
    }

    #[test]
    fn other_syscalls_and_other_architectures_are_allowed() {
        let tiocsti = u64::from(TIOCSTI);
        // 54 is setsockopt on x86_64 and 29 is shmat there: not ioctl.
        assert_eq!(run(AUDIT_ARCH_X86_64, 54, tiocsti), SECCOMP_RET_ALLOW);
        assert_eq!(run(AUDIT_ARCH_X86_64, 29, tiocsti), SECCOMP_RET_ALLOW);
        // 16 is lchown on i386 and fremovexattr on aarch64; 29 is not ioctl on arm.
        assert_eq!(run(AUDIT_ARCH_I386, 16, tiocsti), SECCOMP_RET_ALLOW);
        assert_eq!(run(AUDIT_ARCH_AARCH64, 16, tiocsti), SECCOMP_RET_ALLOW);
        assert_eq!(run(AUDIT_ARCH_ARM, 29, tiocsti), SECCOMP_RET_ALLOW);
        // Unknown architecture (riscv64): allowed, see the comment in PROGRAM, whatever
        // the number, including the ioctl numbers of the handled ABIs.
        let ioctl_numbers = [16, 29, 54, NR_X32_IOCTL, NR_X32_IOCTL_LEGACY];
        for nr in ioctl_numbers {
            assert_eq!(run(0xC000_00F3, nr, tiocsti), SECCOMP_RET_ALLOW, "nr {nr:#x}");
        }
    }
}
