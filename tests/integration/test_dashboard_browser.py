"""The dashboard in a real headless Chromium (Debian's `chromium`), driven over the DevTools
protocol: `--dump-dom` never returns while the page holds its event stream. The page shows
the jobs, the waiting reason, the GPU names and a chart; without a token it shows no job; a
read token sees no cancel button and a cancel it forges is refused 403; a submit token's
cancel button cancels. A screenshot of each page is kept as a test artefact."""
import os
import tempfile
import time

import pytest

from conftest import wait_for
from devtools import Browser
from test_dashboard import served  # noqa: F401 (a fixture: a daemon listening on TCP)

ARTEFACTS = os.environ.get("TRAINQ_TEST_ARTEFACTS",
                           os.path.join(tempfile.gettempdir(), "trainq-test-artefacts"))


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
