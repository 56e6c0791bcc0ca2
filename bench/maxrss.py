#!/usr/bin/env python3
"""Runs a command and writes its peak resident memory to FILE as JSON:
{"max_rss_bytes": N, "exit_status": S, "wall_seconds": T}, where N is the ru_maxrss of the
command's process (and of any children it waited for) as the kernel reports it on exit (never
below the ~10 MB of this forked python before it execs the command).
bench/compare.sh uses it to measure both sides' whole-process peak memory the same way.

Usage: maxrss.py FILE -- COMMAND [ARG...]
The command inherits stdin, stdout, stderr and the environment. Exit status: the command's
(128+N if signal N killed it), 127 if it could not be started, 2 on bad usage.
"""
import json
import os
import signal
import sys
import time


def main(argv):
    if len(argv) >= 2 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) < 4 or argv[2] != "--":
        print("maxrss.py: usage: maxrss.py FILE -- COMMAND [ARG...] (see --help)", file=sys.stderr)
        return 2
    out, cmd = argv[1], argv[3:]
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(cmd[0], cmd)
        except OSError as e:
            print("maxrss.py: cannot run %s: %s" % (cmd[0], e.strerror), file=sys.stderr)
        os._exit(127)
    # Ctrl-C reaches the command (same process group); wait for it to end and report anyway.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        code = 128 - code
    report = {"max_rss_bytes": usage.ru_maxrss * 1024,  # Linux reports KiB
              "exit_status": code,
              "wall_seconds": time.perf_counter() - t0}
    try:
        with open(out, "w") as f:
            json.dump(report, f)
            f.write("\n")
    except OSError as e:
        print("maxrss.py: cannot write %s: %s" % (out, e.strerror), file=sys.stderr)
        return code or 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
