#!/usr/bin/env python3
# no_clone3.py COMMAND...: runs COMMAND where clone3 answers ENOSYS, as
# under a container runtime's older seccomp profile (x86-64 only).
import ctypes, os, struct, sys

def insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)

prog = b"".join([
    insn(0x20, 0, 0, 4),              # ld arch
    insn(0x15, 0, 3, 0xC000003E),     # not x86-64: allow
    insn(0x20, 0, 0, 0),              # ld syscall number
    insn(0x15, 0, 1, 435),            # clone3?
    insn(0x06, 0, 0, 0x00050000 | 38),  # errno ENOSYS
    insn(0x06, 0, 0, 0x7FFF0000),     # allow
])
buf = ctypes.create_string_buffer(prog)
fprog = struct.pack("HxxxxxxQ", len(prog) // 8, ctypes.addressof(buf))
fbuf = ctypes.create_string_buffer(fprog)
libc = ctypes.CDLL(None, use_errno=True)
ul = ctypes.c_ulong
if libc.prctl(38, ul(1), ul(0), ul(0), ul(0)) != 0 or libc.prctl(22, ul(2), ul(ctypes.addressof(fbuf)), ul(0), ul(0)) != 0:
    sys.exit(f"no_clone3: prctl: {os.strerror(ctypes.get_errno())}")
os.execvp(sys.argv[1], sys.argv[1:])
