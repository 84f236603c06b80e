#!/usr/bin/env python3
"""A stand-in for `jupyter lab --no-browser --ip IP --port 0` where Jupyter is not installed:
it binds a free port on IP, prints its URL with a token as Jupyter does, answers GET /lab with
that token (403 without), and ends on Ctrl-C (SIGINT) as Jupyter's second Ctrl-C ends it."""
import http.server
import secrets
import sys

args = sys.argv[1:]
if args[:2] != ["lab", "--no-browser"] or "--ip" not in args or "--port" not in args:
    sys.exit(f"jupyter stand-in: expected lab --no-browser --ip IP --port N, got {args}")
ip, port = args[args.index("--ip") + 1], int(args[args.index("--port") + 1])
token = secrets.token_hex(24)


class Lab(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == f"/lab?token={token}"
        body = b"JupyterLab stand-in\n" if ok else b"forbidden\n"
        self.send_response(200 if ok else 403)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


server = http.server.HTTPServer((ip, port), Lab)
print("[I ServerApp] Jupyter Server is running at:", flush=True)
print(f"    http://{ip}:{server.server_port}/lab?token={token}", flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    print("Shutting down on Ctrl-C", flush=True)
    sys.exit(130)
