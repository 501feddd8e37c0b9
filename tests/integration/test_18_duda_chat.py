"""The chat example (examples/chat) in a real browser: headless Chromium
driven through the Chrome DevTools Protocol (a WebSocket to its
--remote-debugging-port, with Python's websockets). Two pages join, each
sends a line, each sees both lines and the join notices. Screenshots are
saved in the test's folder and in BUILD/test-artifacts/chat/."""

import base64
import contextlib
import json
import shutil
import subprocess
import time

import pytest

from conftest import BUILD, EMULATED, ROOT, SLOW, STATIC
from test_18_duda import build, duda_server, web_service

pytest.importorskip("websockets.sync.client", reason="Python's websockets 13 or later (tools/deps.sh test)")
from websockets.sync.client import connect  # noqa: E402

PACKAGES = BUILD / "duda-packages"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.skipif(STATIC, reason="static binary: no shared objects"),
    pytest.mark.skipif(EMULATED, reason="cross-test: services are built for the host"),
    pytest.mark.skipif(not (PACKAGES / "broadcaster.dpkg").exists(),
                       reason="websocket packages not built (libssl-dev, zlib1g-dev)"),
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium (tools/deps.sh test installs it)"),
]


class Browser:
    """Headless Chromium and a DevTools connection to it."""

    def __init__(self, folder):
        self.profile = folder / "chromium-profile"
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
             "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
             f"--user-data-dir={self.profile}", "--window-size=900,700", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.time() + 30 * SLOW
        while not (port_file.exists() and len(port_file.read_text().split("\n")) >= 2):
            assert self.proc.poll() is None, "chromium exited"
            assert time.time() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.05)
        port, path = port_file.read_text().split("\n")[:2]
        self.stack = contextlib.ExitStack()
        self.ws = self.stack.enter_context(
            connect(f"ws://127.0.0.1:{port}{path}", max_size=None, compression=None))
        self.next_id = 0

    def call(self, method, session=None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv(timeout=30 * SLOW))
            if reply.get("id") == self.next_id:
                assert "error" not in reply, (method, reply["error"])
                return reply["result"]

    def page(self, url):
        target = self.call("Target.createTarget", url=url)["targetId"]
        return self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def eval(self, session, expr):
        r = self.call("Runtime.evaluate", session, expression=expr, returnByValue=True)
        assert "exceptionDetails" not in r, r
        return r["result"].get("value")

    def wait(self, session, expr, what):
        deadline = time.time() + 15 * SLOW
        while not self.eval(session, expr):
            assert time.time() < deadline, f"timed out waiting for {what}"
            time.sleep(0.05)

    def screenshot(self, session, paths):
        png = base64.b64decode(self.call("Page.captureScreenshot", session, format="png")["data"])
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(png)
        return png

    def close(self):
        try:
            self.stack.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def log_lines(browser, session):
    return browser.eval(session, "[...document.querySelectorAll('#log li')]"
                                 ".map(li => li.className + '|' + li.textContent)")


def test_chat_in_two_browser_pages(make_server, tmp_path):
    services = build(ROOT / "examples" / "chat", tmp_path / "services")
    srv = duda_server(make_server, services, [web_service(
        "chat", DocumentRoot=ROOT / "examples" / "chat" / "html")])
    (srv.conf / "plugins" / "duda.conf").write_text(
        f"[DUDA]\n    ServicesRoot {services}\n    PackagesRoot {PACKAGES}\n")
    srv.start()
    browser = Browser(tmp_path)
    try:
        pages = {}
        for nick in ("alice", "bob"):
            s = browser.page(f"http://127.0.0.1:{srv.port}/chat/")
            browser.call("Runtime.enable", s)
            browser.wait(s, "document.readyState === 'complete' && !!document.getElementById('nick')",
                         f"{nick}'s page")
            browser.eval(s, f"document.getElementById('nick').value = '{nick}';"
                            "document.getElementById('join').click()")
            browser.wait(s, f"document.getElementById('status').textContent === 'connected as {nick}'",
                         f"{nick} to connect")
            browser.wait(s, f"document.getElementById('log').textContent.includes('{nick} joined')",
                         f"{nick}'s own join notice")
            assert browser.eval(s, "getComputedStyle(document.getElementById('join-form')).display"
                                   " === 'none'"), "the nickname form stays on screen"
            pages[nick] = s
        browser.wait(pages["alice"], "document.getElementById('log').textContent"
                                     ".includes('bob joined')", "alice to see bob join")
        for n, (nick, text) in enumerate((("alice", "hello from alice"),
                                          ("bob", "hi from bob, ünïcode ✓")), 1):
            browser.eval(pages[nick], f"document.getElementById('text').value = {json.dumps(text)};"
                                      "document.getElementById('send').click()")
            for who, s in pages.items():  # one after the other: the order is known
                browser.wait(s, f"document.querySelectorAll('#log li.msg').length >= {n}",
                             f"{who} to see message {n}")
        artifacts = BUILD / "test-artifacts" / "chat"
        for nick, s in pages.items():
            png = browser.screenshot(s, [tmp_path / f"chat-{nick}.png", artifacts / f"{nick}.png"])
            assert png.startswith(b"\x89PNG")
        alice, bob = log_lines(browser, pages["alice"]), log_lines(browser, pages["bob"])
        assert alice == ["notice join|alice joined", "notice join|bob joined",
                         "msg mine|alicehello from alice", "msg|bobhi from bob, ünïcode ✓"], alice
        assert bob == ["notice join|bob joined", "msg|alicehello from alice",
                       "msg mine|bobhi from bob, ünïcode ✓"], bob
        # bob leaves: alice is told.
        browser.call("Target.closeTarget", targetId=browser.call(
            "Target.getTargetInfo", pages["bob"])["targetInfo"]["targetId"])
        browser.wait(pages["alice"], "document.getElementById('log').textContent"
                                     ".includes('bob left')", "alice to see bob leave")
    finally:
        browser.close()
