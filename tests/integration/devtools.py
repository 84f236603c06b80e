"""A headless Chromium (Debian's `chromium`) driven over the DevTools protocol, for the
dashboard's tests and scripts: `--dump-dom` returns at the page's load event (or once a
`--virtual-time-budget` is spent), so a test that waits for a particular state of the page
asks it through Runtime.evaluate instead."""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import urllib.request

import websocket

from conftest import free_port, wait_for


class DevToolsError(Exception):
    pass


class Browser:
    """One headless Chromium with its own profile, and its first tab over the DevTools
    protocol."""

    def __init__(self, width=1400, height=1000):
        chromium = shutil.which("chromium")
        assert chromium, "chromium is installed by scripts/deps.sh test"
        self.profile = tempfile.mkdtemp(prefix="tq-chromium-")
        port = free_port()
        # As root, Chromium runs only without its sandbox.
        self.proc = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking",
             f"--remote-debugging-port={port}", "--remote-allow-origins=*",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def page_target():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                    pages = [t for t in json.load(r) if t["type"] == "page"]
                    return pages[0]["webSocketDebuggerUrl"] if pages else None
            except OSError:
                return None

        url = wait_for(page_target, timeout=60, interval=0.2, what="Chromium's DevTools port")
        self.ws = websocket.create_connection(url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.errors = []  # exceptions thrown in the page
        self.call("Runtime.enable")
        self.call("Page.enable")

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == "Runtime.exceptionThrown":
                self.errors.append(msg["params"]["exceptionDetails"])
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise DevToolsError(msg["error"])
                return msg["result"]

    def go(self, url):
        self.call("Page.navigate", url=url)

    def eval(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        assert "exceptionDetails" not in r, r["exceptionDetails"]
        return r["result"].get("value")

    def wait(self, expression, timeout=30, what=None):
        def holds():
            try:
                return self.eval(expression)
            except DevToolsError:  # the page was navigating: ask again
                return None
        return wait_for(holds, timeout=timeout, interval=0.1, what=what or expression)

    def screenshot(self, path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.kill()
            self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)
