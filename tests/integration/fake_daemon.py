"""A stand-in for trainqd on a state dir's socket: answers each request from a table, counts
what it received. For the tests of how trainq reads replies it did not expect."""
import http.server
import json
import os
import socketserver
import threading


class FakeDaemon:
    """replies: {(method, path): (status, body)}; body a JSON-able value or bytes, or None to
    close the connection without an answer once the request was read. A list of such pairs
    answers the requests in turn, its last pair every request after. `headers` holds each
    received request's headers, in the order of `received`."""

    def __init__(self, socket_path, replies):
        self.socket_path = socket_path
        self.replies = replies
        self.received = []
        self.headers = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                fake.received.append((self.command, path, body))
                fake.headers.append(dict(self.headers))
                status, reply = fake.answer(self.command, path)
                if reply is None:
                    self.close_connection = True
                    return
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = handle_one

            def log_message(self, *args):  # a Unix socket has no client address to print
                pass

        if os.path.exists(socket_path):
            os.unlink(socket_path)
        self.server = socketserver.ThreadingUnixStreamServer(socket_path, Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, method, path):
        reply = self.replies.get((method, path), (404, {
            "error": {"code": "not_found", "message": f"no route {path}"}}))
        if isinstance(reply, list):
            return reply.pop(0) if len(reply) > 1 else reply[0]
        return reply

    def count(self, method, path):
        return sum(1 for m, p, _ in self.received if (m, p) == (method, path))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        os.unlink(self.socket_path)
