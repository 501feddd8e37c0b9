"""The chat example (examples/chat) in a real browser: headless Chromium
driven through the Chrome DevTools Protocol (a WebSocket to its
--remote-debugging-port, with Python's websockets). Two pages join, each
sees who is in the room and both join notices, each sends a line and sees
both lines, and the one that stays sees the other leave. Screenshots are
saved in the test's folder and in BUILD/test-artifacts/chat/. Then many
plain WebSocket clients join and leave at once and every one keeps the
roster right by the protocol's sequence numbers."""

import asyncio
import base64
import contextlib
import random
import json
import shutil
import subprocess
import time

import pytest

from conftest import BUILD, EMULATED, ROOT, SLOW, STATIC
from test_duda import build, duda_server, web_service

pytest.importorskip("websockets.sync.client", reason="Python's websockets 13 or later (tools/deps.sh test)")
from websockets.asyncio.client import connect as aconnect  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

PACKAGES = BUILD / "duda-packages"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.skipif(STATIC, reason="static binary: no shared objects"),
    pytest.mark.skipif(EMULATED, reason="cross-test: services are built for the host"),
    pytest.mark.skipif(not (PACKAGES / "broadcaster.dpkg").exists(),
                       reason="websocket packages not built (libssl-dev, zlib1g-dev)"),
]
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="no chromium (tools/deps.sh test installs it)")


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


def roster(browser, session):
    return browser.eval(session, "[...document.querySelectorAll('#who li')]"
                                 ".map(li => li.className + '|' + li.textContent)")


def chat_server(make_server, tmp_path, workers=2):
    services = build(ROOT / "examples" / "chat", tmp_path / "services")
    srv = duda_server(make_server, services, [web_service(
        "chat", DocumentRoot=ROOT / "examples" / "chat" / "html")], workers=workers)
    (srv.conf / "plugins" / "duda.conf").write_text(
        f"[DUDA]\n    ServicesRoot {services}\n    PackagesRoot {PACKAGES}\n")
    srv.start()
    return srv


@needs_chromium
def test_chat_in_two_browser_pages(make_server, tmp_path):
    srv = chat_server(make_server, tmp_path)
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
        # Both pages list both people, each its own in bold.
        assert roster(browser, pages["alice"]) == ["me|alice", "|bob"]
        assert roster(browser, pages["bob"]) == ["|alice", "me|bob"]
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
        # alice came first: nobody was there, then she sees bob join.
        assert alice == ["notice here|nobody else is here", "notice join|alice joined",
                         "notice join|bob joined", "msg mine|alicehello from alice",
                         "msg|bobhi from bob, ünïcode ✓"], alice
        # bob is told alice is there (her join was before his), then sees his own join.
        assert bob == ["notice here|here: alice", "notice join|bob joined",
                       "msg|alicehello from alice", "msg mine|bobhi from bob, ünïcode ✓"], bob
        # bob leaves: alice is told, and the roster loses him.
        browser.call("Target.closeTarget", targetId=browser.call(
            "Target.getTargetInfo", pages["bob"])["targetInfo"]["targetId"])
        browser.wait(pages["alice"], "document.getElementById('log').textContent"
                                     ".includes('bob left')", "alice to see bob leave")
        assert log_lines(browser, pages["alice"])[-1] == "notice leave|bob left"
        assert roster(browser, pages["alice"]) == ["me|alice"]
        browser.screenshot(pages["alice"], [tmp_path / "chat-alice-after.png",
                                            artifacts / "alice-after-bob-left.png"])
    finally:
        browser.close()


class Member:
    """A chat client keeping the roster as the page does: "here", then the joins and leaves
    whose seq is above here's."""

    def __init__(self, ws, nick):
        self.ws, self.nick = ws, nick
        self.here_seq = None
        self.roster = {}
        self.my_id = None

    def apply(self, m):
        if m["type"] == "here":
            assert self.here_seq is None, "a second here"
            self.here_seq = m["seq"]
            self.roster = {p["id"]: p["nick"] for p in m["members"]}
            return
        assert self.here_seq is not None, f"{m} before here"
        if m["type"] not in ("join", "leave") or m["seq"] <= self.here_seq:
            return
        if m["type"] == "join":
            assert m["id"] not in self.roster, ("joined twice", m)
            if m["seq"] == self.here_seq + 1:
                self.my_id = m["id"]
            self.roster[m["id"]] = m["nick"]
        else:
            assert m["id"] in self.roster, ("left without being there", m)
            del self.roster[m["id"]]

    async def until(self, cond, what):
        try:
            async with asyncio.timeout(20 * SLOW):
                while not cond():
                    self.apply(json.loads(await self.ws.recv()))
        except TimeoutError:
            raise AssertionError(f"{self.nick}: timed out waiting for {what}: {self.roster}")


def test_roster_with_many_joining_and_leaving_at_once(make_server, tmp_path):
    """40 clients on two workers join at once; then half leave at once while others join.
    Every client that stays ends with the same roster, the room's, and its own id in it."""
    srv = chat_server(make_server, tmp_path)
    uri = f"ws://127.0.0.1:{srv.port}/chat/ws?nick="

    async def run():
        async def join(nick):
            return Member(await aconnect(uri + nick, compression=None, max_queue=None), nick)

        first = await asyncio.gather(*(join(f"a{i}") for i in range(40)))
        random.shuffle(first)
        leaving, staying = first[:20], first[20:]

        async def leave(m):
            await m.ws.close()

        results = await asyncio.gather(*(leave(m) for m in leaving),
                                       *(join(f"b{i}") for i in range(10)))
        members = staying + results[20:]
        await asyncio.gather(*(m.until(lambda m=m: m.my_id is not None, "own join")
                               for m in members))
        room = {m.my_id: m.nick for m in members}
        assert len(room) == 30
        await asyncio.gather(*(m.until(lambda m=m: m.roster == room, "the room")
                               for m in members))
        # The last word: one more message reaches everyone after the roster settled.
        await members[0].ws.send("done")

        async def done(m):
            async with asyncio.timeout(20 * SLOW):
                while True:
                    msg = json.loads(await m.ws.recv())
                    m.apply(msg)
                    if msg["type"] == "message" and msg["text"] == "done":
                        return m.roster

        assert all(r == room for r in await asyncio.gather(*(done(m) for m in members)))
        for m in members:
            await m.ws.close()

    asyncio.run(run())
