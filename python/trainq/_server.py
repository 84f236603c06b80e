"""Which daemon a client talks to, found exactly as the trainq CLI finds it (docs/operations.md,
"A shared server"; src/cli/client.cc ChooseServer, src/os/state_paths.cc ResolveStatePaths)."""

import dataclasses
import os
import pwd
import re
import socket
import stat
from typing import Optional

from .errors import Invalid, NotAllowed

SHARED_SOCKET = "/run/trainq/trainq.sock"
SHARED_STATE_DIR = "/var/lib/trainq"
SHARED_ORIGIN = "the shared daemon of this machine"
SUN_PATH_SIZE = 108
URL_FORM = ("unix:/ABSOLUTE/PATH.sock, http://HOST:PORT or https://HOST:PORT (HOST a name, an "
            "IPv4 address or [IPv6], PORT 1-65535)")

_MASK64 = (1 << 64) - 1
_MUL = 0xC6A4A7935BD1E995
_SEED = 0xC70F6907


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """A daemon trainq does not start: `kind` "unix" (with `path`), "http" or "https" (with
    `host`, an IPv6 address without brackets, and `port`)."""
    kind: str
    path: str = ""
    host: str = ""
    port: int = 0

    def describe(self):
        """The URL that names this endpoint, as the CLI prints it."""
        if self.kind == "unix":
            return "unix:" + self.path
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.kind}://{host}:{self.port}"


@dataclasses.dataclass(frozen=True)
class StatePaths:
    """A personal daemon's state dir and socket; `socket_dir` is "" when the socket is in
    the state dir, else the private directory holding it (a state dir path too long)."""
    state_dir: str
    socket: str
    socket_dir: str


@dataclasses.dataclass(frozen=True)
class ServerChoice:
    """The daemon to talk to: `fixed` when trainq never starts it, else the personal one of
    `paths`. `token` goes over TCP only; `ca_file` is TRAINQ_CA."""
    paths: StatePaths
    fixed: Optional[Endpoint]  # evaluated on import: `Endpoint | None` fails before 3.10
    origin: str
    token: str
    ca_file: str

    def describe(self):
        """"the trainq daemon for DIR" or "the trainq daemon at URL (ORIGIN)"."""
        if self.fixed is None:
            return "the trainq daemon for " + self.paths.state_dir
        return f"the trainq daemon at {self.fixed.describe()} ({self.origin})"


def std_string_hash(data):
    """libstdc++'s std::hash<std::string> of `data` (bytes) on a 64-bit machine:
    _Hash_bytes, a MurmurHash2 variant, with seed 0xc70f6907."""
    def shift_mix(v):
        return v ^ (v >> 47)

    aligned = len(data) & ~7
    h = (_SEED ^ (len(data) * _MUL)) & _MASK64
    for i in range(0, aligned, 8):
        word = int.from_bytes(data[i:i + 8], "little")
        h = ((h ^ ((shift_mix((word * _MUL) & _MASK64) * _MUL) & _MASK64)) * _MUL) & _MASK64
    if len(data) & 7:
        h = ((h ^ int.from_bytes(data[aligned:], "little")) * _MUL) & _MASK64
    h = (shift_mix(h) * _MUL) & _MASK64
    return shift_mix(h)


def _env(name):
    return os.environ.get(name, "")


def default_state_dir():
    """$XDG_STATE_HOME/trainq, else $HOME/.local/state/trainq ($HOME unset: /tmp)."""
    if _env("XDG_STATE_HOME"):
        return _env("XDG_STATE_HOME") + "/trainq"
    return (_env("HOME") or "/tmp") + "/.local/state/trainq"


def _absolute_normal(path):
    """std::filesystem::absolute(path).lexically_normal() with trailing slashes removed."""
    if not path.startswith("/"):
        try:
            path = os.getcwd() + "/" + path
        except OSError:
            return path.rstrip("/") or path[:1]
    parts = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def resolve_state_paths(state_dir=None):
    """The state dir (`state_dir`, else TRAINQ_STATE_DIR, else the default) and its socket:
    trainq.sock there, or, when that path would not fit a Unix socket address, HASH.sock in
    $XDG_RUNTIME_DIR/trainq (else /tmp/trainq-EUID), keyed by the state dir."""
    raw = state_dir or _env("TRAINQ_STATE_DIR") or default_state_dir()
    directory = _absolute_normal(os.fspath(raw))
    sock = directory + "/trainq.sock"
    if len(os.fsencode(sock)) < SUN_PATH_SIZE:
        return StatePaths(directory, sock, "")
    runtime = _env("XDG_RUNTIME_DIR")
    socket_dir = runtime + "/trainq" if runtime else f"/tmp/trainq-{os.geteuid()}"
    name = f"{std_string_hash(os.fsencode(directory)):016x}.sock"
    return StatePaths(directory, f"{socket_dir}/{name}", socket_dir)


def _bad_url(text, field, why):
    shown = text[:200]
    return Invalid("invalid", f"{field}: '{shown}' {why}; expected {URL_FORM}")


def _is_ipv6(host):
    try:
        socket.inet_pton(socket.AF_INET6, host)
    except (OSError, ValueError):
        return False
    return len(host) < 46


def _split_host_port(text):
    """(host, port) of "HOST:PORT" or "[IPv6]:PORT", or None."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0 or not _is_ipv6(text[1:close]):
            return None
        host, rest = text[1:close], text[close + 1:]
    else:
        colon = text.find(":")
        host, rest = text[:colon], text[colon:]
        if colon < 0 or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}", host):
            return None
    match = re.fullmatch(r":([0-9]{1,5})", rest)
    if not match or not 1 <= int(match.group(1)) <= 65535:
        return None
    return host, int(match.group(1))


def parse_server_url(text, field):
    """`unix:/abs/path.sock`, `http://HOST:PORT` or `https://HOST:PORT` (an optional trailing
    "/"): the Endpoint, or Invalid naming `field` and the accepted form."""
    if text.startswith("unix:"):
        path = text[5:]
        if len(path) < 2 or not path.startswith("/"):
            raise _bad_url(text, field, "needs an absolute socket path after unix:")
        if "\0" in path or len(os.fsencode(path)) >= SUN_PATH_SIZE:
            raise _bad_url(text, field, "is not a usable Unix socket path (at most 107 bytes)")
        return Endpoint("unix", path=path)
    for kind in ("http", "https"):
        if text.startswith(kind + "://"):
            rest = text[len(kind) + 3:]
            rest = rest[:-1] if rest.endswith("/") else rest
            host_port = _split_host_port(rest)
            if host_port is None:
                raise _bad_url(text, field, "is not HOST:PORT after the scheme")
            return Endpoint(kind, host=host_port[0], port=host_port[1])
    raise _bad_url(text, field, "has no unix:, http:// or https:// in front")


def _config_home():
    if _env("XDG_CONFIG_HOME"):
        return _env("XDG_CONFIG_HOME")
    home = _env("HOME")
    if not home:
        try:
            home = pwd.getpwuid(os.geteuid()).pw_dir
        except KeyError:
            home = ""
    return home + "/.config"


def read_token_file(path):
    """The token in `path` without trailing blanks; "" when there is no such file. NotAllowed
    unless it is a plain file of the caller's that only they may read (as ssh asks of a key)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ""
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid() or mode & 0o077:
        raise NotAllowed("permission", f"{path} must be a file of yours that only you may read "
                         f"(mode {mode:04o}); run 'chmod 600 {path}'")
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return f.read().rstrip("\r\n ")


def _shared_daemon_here():
    return os.path.lexists(SHARED_SOCKET) or os.path.isdir(SHARED_STATE_DIR)


def choose_server(server=None, state_dir=None, token=None):
    """The daemon the CLI would use given `--server server --state-dir state_dir`: the URL
    (`server`, else TRAINQ_SERVER); else, unless a state dir is named (`state_dir`,
    TRAINQ_STATE_DIR), the shared daemon when its socket or state dir exists; else the
    personal daemon of the state dir. Over TCP the token is `token`, else TRAINQ_TOKEN, else
    the token file. Invalid for a bad URL, NotAllowed for a token file others may read."""
    paths = resolve_state_paths(state_dir)
    url, origin = (server, "server") if server else (_env("TRAINQ_SERVER"), "TRAINQ_SERVER")
    fixed = None
    if url:
        fixed = parse_server_url(url, origin)
    elif not state_dir and not _env("TRAINQ_STATE_DIR") and _shared_daemon_here():
        fixed, origin = Endpoint("unix", path=SHARED_SOCKET), SHARED_ORIGIN
    if fixed is None or fixed.kind == "unix":
        token = ""
    elif not token:
        token = _env("TRAINQ_TOKEN") or read_token_file(_config_home() + "/trainq/token")
    return ServerChoice(paths, fixed, origin, token, _env("TRAINQ_CA"))
