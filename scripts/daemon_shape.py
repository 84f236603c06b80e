#!/usr/bin/env python3
"""The daemon's shape, at a git revision or in the work tree: each object's methods and
fields (declarations in its class body, constructors included), the functions of src/ over
60 lines, and the places outside the mode's own files that ask whether this is a cluster.

  scripts/daemon_shape.py [REV ...]     (default: the work tree)

A text-level count (no compiler): good for comparing revisions, not for exact figures."""
import re
import subprocess
import sys

CLASSES = [("src/daemon/daemon_impl.h", "DaemonImpl"), ("src/daemon/agent.h", "Agent"),
           ("src/daemon/scheduler.h", "Scheduler"), ("src/daemon/mode.h", "Mode"),
           ("src/daemon/local_mode.h", "LocalMode"), ("src/daemon/cluster_mode.h", "ClusterMode"), ("src/daemon/cluster_leader.h", "ClusterLeader"),
           ("src/daemon/api.h", "Api"), ("src/daemon/authenticator.h", "Authenticator"),
           ("src/daemon/gpu_sampler.h", "GpuSampler"), ("src/daemon/submit_batcher.h", "SubmitBatcher"),
           ("src/daemon/token_routes.h", "TokenRoutes"), ("src/daemon/dependencies.h", "Dependencies"),
           ("src/daemon/runtime_config.h", "RuntimeConfig"), ("src/daemon/notifier.h", "Notifier")]
# Where a mode may be named: the modes themselves and their tests.
MODE_FILES = re.compile(r"(cluster\.cc|cluster_mode\.h|local_mode\.|mode\.h|_test\.cc|fake_)")
MODE_CHECK = re.compile(r"\bcluster_\b[^k]|!cluster_\b|if \(!?cluster\b|\bcluster [!=]= nullptr|"
                        r"\bcluster \?|dynamic_cast<ClusterStore")


def read(rev, path):
    if rev == "WT":
        try:
            return open(path).read()
        except FileNotFoundError:
            return None
    r = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def files(rev, folder):
    if rev == "WT":
        out = subprocess.run(["git", "ls-files", folder], capture_output=True, text=True).stdout
    else:
        out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, folder],
                             capture_output=True, text=True).stdout
    return [f for f in out.split() if f.endswith((".cc", ".h"))]


def block(text, start):
    depth, j = 1, start
    while depth > 0:
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
    return j


def class_size(text, name):
    m = re.search(r"\nclass " + name + r"\b[^{;]*\{", text)
    if not m:
        return None
    body = re.sub(r"//[^\n]*", "", text[m.end():block(text, m.end()) - 1])
    while (m := re.search(r"\n\s*(struct|class) \w+[^;{]*\{", body)):  # nested types
        body = body[:m.start()] + body[body.find(";", block(body, m.end())) + 1:]
    while (new := re.sub(r"\{[^{}]*\}", ";", body)) != body:  # inline bodies
        body = new
    methods = fields = 0
    for st in (" ".join(x.split()) for x in body.split(";")):
        st = re.sub(r"^(public|private|protected):\s*", "", st).strip()
        if not st or st.startswith(("friend", "using")) or "= delete" in st:
            continue
        head = st if "(" in st.split("=")[0] else st.split("=")[0]
        if re.search(r"\b(operator\S*|~?[A-Za-z_]\w*)\s*\(", head) and \
                not re.search(r"\b\w+_\s*[({]", head):
            methods += 1
        elif re.search(r"\b\w+_\b", st.split("=")[0]) or st.startswith("static constexpr"):
            fields += 1
    return methods, fields


SIG = re.compile(r"^\s{0,2}[\w:<>,*&~\s\[\]]+\([^;]*\)\s*(const)?\s*(override|noexcept|final)?\s*"
                 r"(->\s*[\w:<>]+)?\s*\{\s*$")


def long_functions(rev, limit=60):
    found = []
    for f in files(rev, "src"):
        if re.search(r"(_test\.cc|fake|test_util|conformance)", f):
            continue
        lines = read(rev, f).split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.rstrip().endswith("{") and not line.strip().startswith(("//", "}")):
                k, head = i, line
                while k > 0 and i - k < 4 and not re.search(r"[;{}]\s*$|^\s*$|^\s*//|^#", lines[k - 1]):
                    k -= 1
                    head = lines[k] + " " + head
                if SIG.match(head) and not re.match(r"\s*(if|for|while|switch|else|do|namespace|"
                                                    r"struct|class|enum|return)\b", head) \
                        and " = " not in head.split("(")[0]:
                    depth, j = 0, i
                    while j < len(lines):
                        depth += lines[j].count("{") - lines[j].count("}")
                        if depth <= 0:
                            break
                        j += 1
                    if j - k + 1 > limit:
                        name = re.search(r"([\w:~]+)\s*\(", head)
                        found.append((j - k + 1, f, name.group(1) if name else "?"))
                    i = j
            i += 1
    return sorted(found, reverse=True)


def mode_checks(rev):
    found = []
    for f in files(rev, "src/daemon"):
        if MODE_FILES.search(f):
            continue
        for n, line in enumerate(read(rev, f).split("\n"), 1):
            if MODE_CHECK.search(line) and not line.strip().startswith("//"):
                found.append(f"{f}:{n}: {line.strip()}")
    return found


for rev in sys.argv[1:] or ["WT"]:
    print(f"== {rev}")
    for path, name in CLASSES:
        text = read(rev, path)
        size = class_size(text, name) if text else None
        if size:
            print(f"  {name:14} {size[0]:3} methods {size[1]:3} fields")
    fns = long_functions(rev)
    print(f"  functions over 60 lines: {len(fns)}")
    for n, f, name in fns:
        print(f"    {n:4} {f} {name}")
    checks = mode_checks(rev)
    print(f"  mode checks outside the modes' files: {len(checks)}")
    for c in checks:
        print(f"    {c}")
