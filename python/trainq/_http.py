"""One HTTP/1.1 request per connection to the daemon: its Unix socket, or TCP (plain or TLS)
with a bearer token. Tells apart a request that surely did not arrive (NotDelivered) from one
whose answer was lost (AnswerLost), as the CLI does (src/api/http.h, HttpCall)."""

import http.client
import os
import pwd
import socket
import ssl
import stat
import struct

from .errors import Invalid, NotAllowed, Unavailable


class NotDelivered(Exception):
    """Nothing was sent: nobody listens, or the connection or TLS handshake failed.
    `error` is the Unavailable to raise when this is final."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


class AnswerLost(Exception):
    """The request went out (it may have been carried out) and no complete answer came."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTPConnection whose connect() opens the daemon's Unix socket at `socket_path`."""

    def __init__(self, socket_path, timeout):
        super().__init__("trainq", timeout=timeout)
        self.socket_path = socket_path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def tls_context(ca_file):
    """A TLS 1.2+ client context verifying the server against `ca_file` alone when given (as
    curl's --cacert), else the system's CAs. Invalid when `ca_file` cannot be used."""
    try:
        ctx = ssl.create_default_context(cafile=ca_file or None)
    except (OSError, ssl.SSLError) as e:
        raise Invalid("invalid", f"the CA certificate file {ca_file} (TRAINQ_CA) cannot be "
                      f"used: {e}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def _user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return ""


def check_listener(sock, socket_path):
    """NotAllowed unless the process listening on the Unix socket runs as the caller or root:
    every request carries the caller's environment."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        raise NotAllowed("permission", f"cannot tell who listens on {socket_path} (SO_PEERCRED "
                         "failed); nothing was sent") from None
    _, uid, _ = struct.unpack("3i", creds)
    euid = os.geteuid()
    if uid in (euid, 0):
        return
    who = f"uid {uid}"
    if _user_name(uid):
        who = f"user {_user_name(uid)} ({who})"
    raise NotAllowed("permission", f"refusing to talk to {socket_path}: the process listening "
                     f"there runs as {who}, not as you (uid {euid}) or root, so it is not your "
                     "trainq daemon; nothing was sent. Find out who put it there, remove that "
                     "socket file, or use another state dir")


def _private_dir_problem(st):
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.geteuid():
        return f"it is owned by uid {st.st_uid}, not by you (uid {os.geteuid()})"
    if st.st_mode & 0o077:
        return f"its mode is {stat.S_IMODE(st.st_mode):04o}; others may enter it"
    return ""


def check_socket_dir(directory):
    """NotAllowed when `directory` (a socket directory outside the state dir) exists and is
    not the caller's own, mode 0700 and no link; one that does not exist holds no listener."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return
    problem = _private_dir_problem(st)
    if problem:
        raise NotAllowed("permission", f"unsafe socket directory {directory}: {problem}. "
                         "trainq keeps its socket in a directory only you can enter (yours, "
                         f"mode 0700, not a link); remove {directory} (trainq creates it again) "
                         "or set XDG_RUNTIME_DIR to a directory of yours")


def _connect(endpoint, socket_path, timeout, ssl_context):
    """An open connection whose listener was judged; NotDelivered when none could be made."""
    if endpoint is None or endpoint.kind == "unix":
        path = socket_path if endpoint is None else endpoint.path
        conn = UnixHTTPConnection(path, timeout)
        where = path
    elif endpoint.kind == "https":
        conn = http.client.HTTPSConnection(endpoint.host, endpoint.port, timeout=timeout,
                                           context=ssl_context)
        where = endpoint.describe()
    else:
        conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=timeout)
        where = endpoint.describe()
    try:
        conn.connect()
    except ssl.SSLCertVerificationError as e:
        conn.close()
        raise NotAllowed("permission", f"the TLS certificate of {where} does not verify "
                         f"({e.verify_message}); nothing was sent. Set TRAINQ_CA to the CA "
                         "file that signed it") from None
    except (OSError, http.client.HTTPException) as e:
        conn.close()
        raise NotDelivered(Unavailable("unavailable", f"cannot connect to {where}: "
                                       f"{getattr(e, 'strerror', None) or e}")) from None
    if isinstance(conn, UnixHTTPConnection):
        try:
            check_listener(conn.sock, where)
        except NotAllowed:
            conn.close()
            raise
    return conn


def exchange(endpoint, socket_path, method, target, body=b"", headers=None, timeout=30.0,
             ssl_context=None):
    """Sends one request on a new connection to `endpoint` (None: the Unix socket at
    `socket_path`) and returns (status, content type, body bytes). Raises NotDelivered,
    AnswerLost, or NotAllowed for a listener not to be trusted (nothing sent then)."""
    conn = _connect(endpoint, socket_path, timeout, ssl_context)
    head = {"Connection": "close", "Content-Type": "application/json", **(headers or {})}
    try:
        conn.request(method, target, body=body, headers=head)
        answer = conn.getresponse()
        data = answer.read()
        return answer.status, answer.getheader("Content-Type", ""), data
    except (OSError, http.client.HTTPException) as e:
        raise AnswerLost(Unavailable("io", f"the connection to the daemon broke after the "
                                     f"request was sent ({e!r}); it may have been carried "
                                     "out")) from None
    finally:
        conn.close()
