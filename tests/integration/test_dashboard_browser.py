"""The dashboard in a real headless Chromium (Debian's `chromium`), driven over the DevTools
protocol to wait for what each step needs. The page shows the jobs, the waiting reason, the
GPU names and a chart; without a token it shows no job; a read token sees no cancel button and
a cancel it forges is refused 403; a submit token's cancel button cancels. The one-shot
screenshot command of docs/dashboard.md, run as written, shows the queue; at the load event the
page says it is loading, never "disconnected". A screenshot of each page is kept as a test
artefact."""
import os
import re
import shutil
import subprocess
import tempfile
import time
from html.parser import HTMLParser

import pytest

from conftest import trainq_binary, wait_for
from devtools import Browser
from test_dashboard import served  # noqa: F401 (a fixture: a daemon listening on TCP)

ARTEFACTS = os.environ.get("TRAINQ_TEST_ARTEFACTS",
                           os.path.join(tempfile.gettempdir(), "trainq-test-artefacts"))
DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "dashboard.md")


@pytest.fixture
def browser():
    b = Browser()
    yield b
    b.close()


def test_the_page_shows_jobs_reasons_gpus_and_a_chart(served, browser):
    tq, port = served
    marker = os.path.join(tq.work, "go-on")
    running = tq.submit("--gpus", "1", "--mem", "60GiB", "--name", "resnet-big",
                        cmd=["sh", "-c", f"echo epoch 1 loss 0.93; while [ ! -e {marker} ]; do "
                             "sleep 0.1; done; echo epoch 2 loss 0.71; sleep 600"])
    tq.wait_state(running, "running")
    waiting = tq.submit("--gpus", "2", "--mem", "70GiB", "--name", "llama-ft",
                        cmd=["sleep", "600"])
    reason = wait_for(lambda: tq.show(waiting)["reason"], what="the waiting job's reason")
    url = tq.run("dashboard", "--no-open").stdout.strip()
    browser.go(url)
    browser.wait(f"document.querySelector('#queue [data-job=\"{waiting}\"]') !== null",
                 what="the waiting job's row")
    text = browser.eval("document.body.innerText")
    assert "llama-ft" in text and "resnet-big" in text
    # The reason as the daemon gives it, in the waiting job's row.
    row = browser.eval(f"document.querySelector('#queue [data-job=\"{waiting}\"]').innerText")
    assert reason.split(";")[0][:40] in row, (reason, row)
    assert "Simulated A100 80GB" in browser.eval("document.querySelector('#gpus').innerText")
    browser.wait("document.querySelectorAll('#gpus .chart canvas').length > 0",
                 what="a chart drawn")
    # The token left the address bar for the tab's sessionStorage.
    assert "token" not in browser.eval("location.href")
    assert browser.eval("sessionStorage.getItem('trainq.token')").startswith("tq_")
    # Live: a job submitted now appears without a reload.
    late = tq.submit("--gpus", "0", "--name", "late-arrival", cmd=["sleep", "600"])
    browser.wait(f"document.querySelector('#queue [data-job=\"{late}\"]') !== null",
                 what="the new job's row, from the event stream")
    time.sleep(1)  # the charts' next sample
    browser.screenshot(os.path.join(ARTEFACTS, "dashboard.png"))
    # A job's page: its reason, its log followed.
    browser.go(url.split("#")[0] + f"#job={running}")
    browser.wait("(document.querySelector('#job-view') || {}).innerText?.includes('resnet-big')",
                 what="the job's page")
    browser.wait("document.querySelector('#log').innerText.includes('epoch 1 loss 0.93')",
                 what="the log")
    open(marker, "w").close()  # more output: the page follows it
    browser.wait("document.querySelector('#log').innerText.includes('epoch 2 loss 0.71')",
                 what="the log's new line")
    browser.screenshot(os.path.join(ARTEFACTS, "dashboard-job.png"))
    assert browser.errors == [], browser.errors
    tq.run("cancel", str(running), str(waiting), str(late))


def test_an_elastic_jobs_page_shows_its_range_and_its_resizes(served, browser):
    tq, port = served
    job = tq.submit("--gpus", "1:2", "--name", "elastic-ft", cmd=["sleep", "600"])
    tq.wait_state(job, "running")
    url = tq.run("dashboard", "--no-open").stdout.strip()
    browser.go(url)  # the token, kept for the tab
    browser.wait(f"document.querySelector('#queue [data-job=\"{job}\"]') !== null",
                 what="the job's row")
    browser.go(url.split("#")[0] + f"#job={job}")
    browser.wait("(document.querySelector('#job-view') || {}).innerText?.includes('elastic-ft')",
                 what="the job's page")
    text = browser.eval("document.querySelector('#job-view').innerText")
    assert "1–2× whole (elastic)" in text and "0 resizes" in text, text
    assert browser.errors == [], browser.errors
    tq.run("cancel", str(job))


def test_without_a_token_the_page_asks_for_one_and_shows_no_job(served, browser):
    tq, port = served
    tq.submit("--gpus", "1", "--name", "secret-run", cmd=["sleep", "600"])
    browser.go(f"http://127.0.0.1:{port}/")
    browser.wait("document.querySelector('#token-input') !== null", what="the token prompt")
    time.sleep(1)
    assert "secret-run" not in browser.eval("document.body.innerText")
    assert browser.eval("document.querySelectorAll('[data-job]').length") == 0
    browser.screenshot(os.path.join(ARTEFACTS, "dashboard-no-token.png"))
    assert browser.errors == [], browser.errors


def test_a_read_token_gets_no_cancel_button_and_its_forged_cancel_is_refused(served, browser):
    tq, port = served
    job = tq.submit("--gpus", "1", "--name", "keep-me", cmd=["sleep", "600"])
    tq.wait_state(job, "running")
    url = tq.run("dashboard", "--no-open").stdout.strip()
    browser.go(url)
    browser.wait(f"document.querySelector('[data-job=\"{job}\"]') !== null", what="the job's row")
    assert browser.eval("document.querySelectorAll('button.cancel, button.retry').length") == 0
    status = browser.eval(
        f"fetch('/v1/jobs/{job}/cancel', {{method: 'POST', headers: {{Authorization: "
        f"'Bearer ' + sessionStorage.getItem('trainq.token')}}}}).then(r => r.status)")
    assert status == 403
    assert tq.state(job) == "running"
    # A submit token's page has the button, and it cancels.
    submit = tq.run("token", "create", "web", "--role", "submit").stdout.strip()
    browser.eval("sessionStorage.clear(); true")
    browser.go("about:blank")
    browser.go(f"http://127.0.0.1:{port}/#token={submit}")
    browser.wait("(document.querySelector('#caller') || {}).textContent?.includes('submit')",
                 what="the page signed in with the submit token")
    button = f"document.querySelector('[data-job=\"{job}\"] button.cancel')"
    browser.wait(f"{button} !== null", what="the cancel button")
    browser.eval(f"window.confirm = () => true; {button}.click(); true")
    tq.wait_state(job, "cancelled")
    assert browser.errors == [], browser.errors


class Texts(HTMLParser):
    """The text inside each element that has an id, from a page's HTML."""
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
            "source", "track", "wbr"}

    def __init__(self, html):
        super().__init__()
        self.ids, self.of = [], {}
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.ids.append(dict(attrs).get("id"))

    def handle_endtag(self, tag):
        if tag not in self.VOID and self.ids:
            self.ids.pop()

    def handle_data(self, data):
        for i in filter(None, self.ids):
            self.of[i] = self.of.get(i, "") + data

    def __getitem__(self, element_id):
        return " ".join(self.of.get(element_id, "").split())


def shoot(tq, where, command):
    """Runs a documented shell line as a user would, with this test's `trainq` and Chromium on
    PATH; Chromium gets its own profile, `--no-sandbox` as root (it refuses to start
    otherwise), and `--dump-dom`, which prints the page as the picture was taken."""
    bin_dir = os.path.join(where, "bin")
    os.makedirs(bin_dir)
    os.symlink(trainq_binary(), os.path.join(bin_dir, "trainq"))
    extra = "--no-sandbox " if os.geteuid() == 0 else ""
    with open(os.path.join(bin_dir, "chromium"), "w") as f:
        f.write(f'#!/bin/sh\nexec {shutil.which("chromium")} {extra}--disable-gpu '
                f'--user-data-dir={where}/profile --dump-dom "$@"\n')
    os.chmod(os.path.join(bin_dir, "chromium"), 0o755)
    env = dict(tq.env, PATH=bin_dir + os.pathsep + os.environ["PATH"])
    run = subprocess.run(["bash", "-c", command], cwd=where, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return Texts(run.stdout)


def test_the_documented_screenshot_shows_the_queue_and_never_disconnected_at_load(served,
                                                                                tmp_path):
    tq, port = served
    running = tq.submit("--gpus", "1", "--mem", "60GiB", "--name", "resnet-big",
                        cmd=["sleep", "600"])
    tq.wait_state(running, "running")
    waiting = tq.submit("--gpus", "2", "--mem", "70GiB", "--name", "llama-ft",
                        cmd=["sleep", "600"])
    wait_for(lambda: tq.show(waiting)["reason"], what="the waiting job's reason")
    with open(DOC) as f:
        lines = [m.group(1) for m in re.finditer(r"^\$ (chromium .*)$", f.read(), re.M)]
    assert len(lines) == 1, f"one headless Chromium command in docs/dashboard.md: {lines}"
    command = lines[0]
    picture = re.search(r"--screenshot=(\S+)", command).group(1)

    page = shoot(tq, str(tmp_path / "documented"), command)
    png = tmp_path / "documented" / picture
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    os.makedirs(ARTEFACTS, exist_ok=True)
    shutil.copy(png, os.path.join(ARTEFACTS, "dashboard-documented.png"))
    assert page["live"] == "live", page["live"]
    queue = page["queue-tables"]
    assert "llama-ft" in queue and "resnet-big" in queue, queue
    assert page["queue-count"] == "1 waiting · 1 running"
    assert "Simulated A100 80GB" in page["gpu-nodes"]
    for panel in ("gpu-nodes", "queue-tables", "history-body"):
        assert "loading" not in page[panel], (panel, page[panel])

    # At the load event (the same line without the page's time): no panel is empty, and
    # nothing says "disconnected" before a request has failed.
    early = re.sub(r" --virtual-time-budget=\S+", "", command)
    assert early != command
    page = shoot(tq, str(tmp_path / "at-load"), early)
    assert page["live"] in ("connecting…", "live"), page["live"]
    for panel in ("gpu-nodes", "queue-tables", "history-body"):
        assert page[panel], f"#{panel} is empty at the load event"
    assert "disconnected" not in page["top"]
    tq.run("cancel", str(running), str(waiting))
