#!/usr/bin/env python3
"""Watches the machine while CI runs, to tell what stalled a test run when one stalls.

Two clean-clone CI runs failed with loopback connects that did not finish in 10 s while unrelated
tests in the same process took 9 s too. This says which kind of stall it was, next time:

- the whole machine (this watcher's own 100 ms sleep overran by a second or more: the hypervisor
  or the host froze the VM; the CPU "steal" counted meanwhile is printed);
- the disk (the kernel's pressure stall information, /proc/pressure/io: the share of a second in
  which every runnable task waited for I/O);
- the test process alone (it used almost no CPU for 3 s while it ran): the state and kernel wait
  channel of each of its threads are printed (D with a wait in the file system is a thread
  blocked on the disk; all in futex waits is a deadlock or a pool starved by blocked threads).

It writes one line per event to the file given as its first argument and exits when the process
whose pid is its second argument, its parent, does (the CI script, which also kills it on exit). It
reads only /proc; it changes nothing.
"""
import os
import sys
import time

out_path, parent = sys.argv[1], int(sys.argv[2])
TICK = 0.1


def read(path):
    # A process or thread may go between listing and reading, and names need not be UTF-8.
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def steal():
    fields = read("/proc/stat").split("\n", 1)[0].split()
    return int(fields[8]) if len(fields) > 8 else 0


def pressure(kind, line):
    for row in read(f"/proc/pressure/{kind}").splitlines():
        if row.startswith(line):
            return int(row.rsplit("total=", 1)[1])
    return 0


def test_processes():
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        # The test binary itself (argv[0]), not a driver or compiler that names it in its arguments.
        program = os.path.basename(read(f"/proc/{pid}/cmdline").split("\0", 1)[0])
        if program.endswith(".xctest") or program == "swiftpm-testing-helper":
            found.append(int(pid))
    return found


def cpu_ticks(pid):
    stat = read(f"/proc/{pid}/stat")
    if not stat:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def threads(pid):
    states = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return "(gone)"
    for tid in tids:
        stat = read(f"/proc/{pid}/task/{tid}/stat")
        if not stat:
            continue
        name = stat.split("(", 1)[1].rsplit(")", 1)[0]
        state = stat.rsplit(")", 1)[1].split()[0]
        wchan = read(f"/proc/{pid}/task/{tid}/wchan") or "-"
        key = f"{state}:{wchan}:{name}"
        states[key] = states.get(key, 0) + 1
    return ", ".join(f"{count}x {key}" for key, count in sorted(states.items()))


def main():
    out = open(out_path, "a", buffering=1)

    def say(text):
        out.write(time.strftime("%H:%M:%S ", time.gmtime()) + text + "\n")

    say("watching (tick 100 ms)")
    last = time.monotonic()
    last_steal = steal()
    io_window = []  # (time, io full total in µs)
    idle_since = {}  # pid -> (time, cpu ticks) of the last sample that saw CPU used
    reported_idle = set()
    watched, tick = [], 0
    while True:
        # The CI script gone (also when it exited and is not yet reaped: this process then has
        # another parent), this one goes too.
        if os.getppid() != parent:
            break
        try:
            os.kill(parent, 0)
        except OSError:
            break
        time.sleep(TICK)
        now = time.monotonic()
        gap = now - last
        s = steal()
        if gap > 1.0:
            say(f"machine stall: a {TICK * 1000:.0f} ms sleep took {gap * 1000:.0f} ms; steal {s - last_steal} ticks meanwhile")
        last, last_steal = now, s

        io_window.append((now, pressure("io", "full")))
        while len(io_window) > 1 and now - io_window[0][0] > 1.0:
            io_window.pop(0)
        if len(io_window) > 1 and now - io_window[0][0] >= 0.9:
            stalled_ms = (io_window[-1][1] - io_window[0][1]) / 1000
            if stalled_ms > 500:
                say(f"disk stall: every runnable task waited for I/O {stalled_ms:.0f} ms of the last second")
                io_window = io_window[-1:]

        tick += 1
        if tick % 10 == 0:  # the process list once a second: reading every cmdline costs
            watched = test_processes()
        for pid in watched:
            ticks = cpu_ticks(pid)
            if ticks is None:
                continue
            seen = idle_since.get(pid)
            if seen is None or ticks > seen[1] + 1:
                idle_since[pid] = (now, ticks)
                reported_idle.discard(pid)
            elif now - seen[0] > 3.0 and pid not in reported_idle:
                reported_idle.add(pid)
                say(f"test process {pid} used no CPU for {now - seen[0]:.1f} s; its threads: {threads(pid)}")
    say("done")


try:
    main()
except Exception as error:  # a watcher that fails says so, and never fails the run
    with open(out_path, "a") as out:
        out.write(f"stall watch stopped: {error!r}\n")
