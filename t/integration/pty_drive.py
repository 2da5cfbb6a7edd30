#!/usr/bin/env python3
"""Runs COMMAND on a terminal of its own, as a user at a keyboard would.

pty_drive.py [STEP...] -- COMMAND...
  size:R,C     the terminal's size at start (default 33,101)
  expect:RE    wait (up to 20 s) until what COMMAND wrote matches RE
  send:TEXT    type TEXT (Python escapes: \\r, \\x03)
  resize:R,C   resize the terminal (COMMAND gets SIGWINCH)
Prints what COMMAND wrote (carriage returns dropped), then "status N".
Exits 1 when an expect times out."""
import fcntl, os, pty, re, select, struct, sys, termios, time

def winsize(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

split = sys.argv.index("--")
steps, command = sys.argv[1:split], sys.argv[split + 1:]
rows, cols = 33, 101
for s in steps:
    if s.startswith("size:"):
        rows, cols = map(int, s[5:].split(","))
pid, fd = pty.fork()
if pid == 0:
    winsize(0, rows, cols)
    os.execvp(command[0], command)
out = b""

def read(deadline):
    global out
    while True:
        left = deadline - time.time()
        if left <= 0:
            return False
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            return False
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return None  # COMMAND and all on its terminal are gone
        if not chunk:
            return None
        out += chunk
        return True

failed = False
for s in steps:
    kind, _, arg = s.partition(":")
    if kind == "expect":
        deadline = time.time() + 20
        while not re.search(arg.encode(), out):
            if not read(deadline):
                print(f"(expect {arg!r}: not seen)")
                failed = True
                break
    elif kind == "send":
        os.write(fd, arg.encode().decode("unicode_escape").encode())
    elif kind == "resize":
        winsize(fd, *map(int, arg.split(",")))
    if failed:
        break
deadline = time.time() + 20
while read(deadline):
    pass
ended, status = os.waitpid(pid, os.WNOHANG)
if not ended:  # still running 20 s on: a failure, never a hang
    print("(still running: killed)")
    os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    failed = True
sys.stdout.write(out.decode(errors="replace").replace("\r", ""))
print(f"\nstatus {os.waitstatus_to_exitcode(status)}")
sys.exit(1 if failed else 0)
