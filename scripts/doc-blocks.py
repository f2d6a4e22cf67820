#!/usr/bin/env python3
"""Runs the code blocks of the README and the docs against a real redis-server.

Every fenced block tagged sh, python, js or rust in README.md, docs/*.md and
clients/*/README.md runs, page by page, in a scratch directory of the page's own, with:
  - a private redis-server on a free port (flushed before each page), as REDIS_URL;
  - target/debug first on PATH (the `weir` binary: build it first);
  - free ports in PORT and NODE_PORT (for the endpoints the docs start);
  - clients/python's venv (scripts/ensure-clients.sh) as `python3`, clients/node and its
    dependencies resolvable by `require`.
sh runs under `bash -e -o pipefail`, python with the venv's python, js with node. A
block fails on a non-zero exit, or when it runs past the timeout.

The line before a fence may hold one marker, an HTML comment (invisible on GitHub):
  <!-- doc-block: skip: REASON -->   not run; the reason is printed (keep these few)
  <!-- doc-block: background -->     started, left running for the page's later blocks
                                       (an endpoint), stopped at the page's end; it fails
                                       the page if it exits early with an error
  <!-- doc-block: until-stopped -->  a process that serves until stopped (a worker): it
                                       passes if it is still running after a few seconds
  <!-- doc-block: exec-worker -->    a worker of the exec protocol: run as its comment says,
                                       by `weir work --handler exec:'...' --drain`, over a
                                       queue holding one job of kind `resize` if it has one
Blocks name Redis as readers copy them (redis://127.0.0.1:6379, redis.Redis(), new
Redis()): those are pointed at the private server (SUBSTITUTIONS below).

Usage: python3 scripts/doc-blocks.py [FILE.md ...]   (default: every page)
"""

import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LANGS = {"sh", "bash", "python", "js", "rust"}
TIMEOUT = 120
SETTLE = 3.0
MARKER = re.compile(
    r"<!--\s*doc-block:\s*(skip:\s*(?P<reason>.+?)|background|until-stopped|exec-worker)\s*-->")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def blocks(path):
    """(line, lang, marker, reason, code) for each fenced block of a runnable language."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w+)", lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        if lang in LANGS:
            prev = lines[start - 1] if start > 0 else ""
            mk = MARKER.search(prev)
            marker = reason = None
            if mk:
                marker = mk.group(1).split(":")[0].strip()
                reason = mk.group("reason")
            elif "doc-block" in prev:
                sys.exit(f"{path}:{start}: unreadable doc-block marker: {prev}")
            out.append((start + 1, lang, marker, reason, "\n".join(lines[start + 1 : j]) + "\n"))
        i = j + 1
    return out


class Redis:
    def __init__(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="weir-doc-redis-")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while not self.ping():
            if time.time() > deadline:
                sys.exit("redis-server did not start")
            time.sleep(0.05)

    def ping(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def flush(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(b"FLUSHALL\r\n")
            s.recv(16)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def command(lang, file):
    venv = os.path.join(ROOT, "target/clients/venv/bin/python")
    return {
        "sh": ["bash", "-e", "-o", "pipefail", file],
        "bash": ["bash", "-e", "-o", "pipefail", file],
        "python": [venv if os.path.exists(venv) else "python3", file],
        "js": ["node", file],
    }[lang]


def prepare(code, lang, port):
    """The block as it runs: Redis addresses pointed at the private server."""
    subs = [("redis://127.0.0.1:6379", f"redis://127.0.0.1:{port}")]
    if lang == "python":
        subs.append(("redis.Redis()", f"redis.Redis(port={port})"))
    if lang == "js":
        subs.append(("new Redis()", f"new Redis({port})"))
    for a, b in subs:
        code = code.replace(a, b)
    return code


def scratch(path):
    """A scratch directory for one page, where `require('weir-producer')` and its
    dependencies resolve (clients/node)."""
    d = tempfile.mkdtemp(prefix="weir-doc-")
    mods = os.path.join(d, "node_modules")
    os.makedirs(mods)
    node = os.path.join(ROOT, "clients/node")
    os.symlink(node, os.path.join(mods, "weir-producer"))
    deps = os.path.join(node, "node_modules")
    if os.path.isdir(deps):
        for name in os.listdir(deps):
            if not name.startswith("."):
                os.symlink(os.path.join(deps, name), os.path.join(mods, name))
    # clients/python/README.md: "copy weir_exec.py next to your program".
    shutil.copy(os.path.join(ROOT, "clients/python/weir_exec.py"), d)
    return d


def run_page(path, redis, env):
    rel = os.path.relpath(path, ROOT)
    todo = blocks(path)
    if not todo:
        return [], []
    redis.flush()
    cwd = scratch(path)
    failures, skipped, background = [], [], []
    listening = open_ports(env)
    try:
        for n, (line, lang, marker, reason, code) in enumerate(todo):
            where = f"{rel}:{line} ({lang})"
            if marker == "skip":
                skipped.append(f"{where}: {reason}")
                continue
            if lang == "rust":
                failures.append(f"{where}: a rust block needs a doc-block marker (run it elsewhere)")
                continue
            ext = {"sh": "sh", "bash": "sh", "python": "py", "js": "js"}[lang]
            file = os.path.join(cwd, f"block{n}.{ext}")
            with open(file, "w") as f:
                f.write(prepare(code, lang, redis.port))
            log = open(os.path.join(cwd, f"block{n}.log"), "w+")
            cmd = command(lang, file)
            if marker == "exec-worker":
                cmd = ["bash", "-e", "-c", exec_worker(lang, file, f"doc-exec-{n}", code)]
            # stdin: a pipe, closed at once (as `weir work` closes an exec worker's)
            p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log,
                                 stderr=subprocess.STDOUT, stdin=subprocess.PIPE)
            p.stdin.close()
            if marker == "background":
                background.append((where, p, log))
                wait_listening(env, p, listening)
                listening = open_ports(env)
                continue
            limit = SETTLE if marker == "until-stopped" else TIMEOUT
            try:
                rc = p.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                p.terminate()
                p.wait()
                if marker != "until-stopped":
                    failures.append(f"{where}: still running after {TIMEOUT}s\n{tail(log)}")
                else:
                    print(f"ok    {where} (ran {SETTLE:.0f}s, stopped)")
                continue
            if rc != 0:
                failures.append(f"{where}: exit {rc}\n{tail(log)}")
            else:
                print(f"ok    {where}")
        for where, p, log in background:
            if p.poll() is not None and p.returncode != 0:
                failures.append(f"{where}: the background block exited {p.returncode}\n{tail(log)}")
            else:
                print(f"ok    {where} (in the background)")
    finally:
        for _, p, _ in background:
            if p.poll() is None:
                p.terminate()
                p.wait()
        shutil.rmtree(cwd, ignore_errors=True)
    return failures, skipped


def exec_worker(lang, file, queue, code):
    """The script that runs an exec-protocol worker as `weir work` runs one: over a queue
    holding one job of kind `resize` if the worker handles it, until drained."""
    exe = "python3" if lang == "python" else "node"
    job = ""
    if '"resize"' in code or "'resize'" in code:
        job = f"echo '{{\"path\": \"a.png\"}}' | weir enqueue --queue {queue} --kind resize\n"
    return job + f"weir work --queue {queue} --handler 'exec:{exe} {file}' --drain\n"


def open_ports(env):
    """Which of PORT and NODE_PORT answer now."""
    out = set()
    for port in (env["PORT"], env["NODE_PORT"]):
        try:
            socket.create_connection(("127.0.0.1", int(port)), timeout=0.2).close()
            out.add(port)
        except OSError:
            pass
    return out


def wait_listening(env, p, before):
    """Waits (10 s at most) until PORT or NODE_PORT answers where it did not `before`,
    or the process exits."""
    deadline = time.time() + 10
    while time.time() < deadline and p.poll() is None:
        if open_ports(env) - before:
            return
        time.sleep(0.05)


def tail(log):
    log.flush()
    log.seek(0)
    return "".join(log.readlines()[-25:])


def main():
    pages = sys.argv[1:] or sorted(
        [os.path.join(ROOT, "README.md")]
        + glob.glob(os.path.join(ROOT, "docs/*.md"))
        + glob.glob(os.path.join(ROOT, "clients/*/README.md")))
    weir = os.path.join(ROOT, "target/debug/weir")
    if not os.path.exists(weir):
        sys.exit("build the weir binary first: cargo build --bin weir")
    redis = Redis()
    env = dict(os.environ)
    env.update({
        "REDIS_URL": f"redis://127.0.0.1:{redis.port}",
        "PATH": os.path.join(ROOT, "target/debug") + os.pathsep + env.get("PATH", ""),
        "WEIR_LOG": "warn",
    })
    failures, skipped = [], []
    try:
        for page in pages:
            # Ports of their own per page: a server of the page before may linger.
            env["PORT"], env["NODE_PORT"] = str(free_port()), str(free_port())
            f, s = run_page(os.path.abspath(page), redis, env)
            failures += f
            skipped += s
    finally:
        redis.stop()
    for s in skipped:
        print(f"skip  {s}")
    for f in failures:
        print(f"FAIL  {f}")
    print(f"{len(failures)} failed, {len(skipped)} skipped")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
