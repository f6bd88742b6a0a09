"""A real headless Chromium driven over the DevTools protocol on a pipe (no websocket, no extra package).

``chromium --remote-debugging-pipe`` reads protocol messages from fd 3 and writes them to fd 4, each a
JSON object ended by a NUL byte. :class:`Browser` opens one page, records console messages, uncaught
exceptions and log entries (failed loads, CSP violations), evaluates JavaScript and takes screenshots:

    with Browser() as b:
        b.open(Path("report.html"))
        assert b.eval("document.title") == "..."
        b.screenshot(Path("shot.png"))
        assert not b.errors()
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, width: int = 1280, height: int = 900, timeout: float = 30.0):
        self.binary = find_chromium()
        if self.binary is None:
            raise BrowserError("no chromium on PATH (Debian: apt-get install -y chromium)")
        self.width, self.height, self.timeout = width, height, timeout
        self.events: list[dict[str, Any]] = []
        self._next = 0
        self._buf = b""
        self.session: str | None = None

    # ------------------------------------------------------------------ process
    def __enter__(self) -> Browser:
        self.profile = tempfile.mkdtemp(prefix="m3-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire() -> None:  # runs in the child: the protocol pipe must be fds 3 and 4
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child_r, from_child_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        args = [
            self.binary,
            "--headless",
            "--remote-debugging-pipe",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-sync",
            "--mute-audio",
            f"--user-data-dir={self.profile}",
            f"--window-size={self.width},{self.height}",
            "about:blank",
        ]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=wire,
            pass_fds=(3, 4),  # wire() puts the pipe ends there before the other fds are closed
        )
        os.close(to_child_r)
        os.close(from_child_w)
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
        )
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.call("Browser.close", session=False, timeout=5)
        except (BrowserError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.stderr:
            self.proc.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    # ------------------------------------------------------------------ protocol
    def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to_child, data) :]

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("chromium did not answer in time")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    err = self.proc.stderr.read().decode(errors="replace")[-2000:] if self.proc.stderr else ""
                    raise BrowserError(f"chromium exited: {err}")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(
        self, method: str, params: dict | None = None, session: bool = True, timeout: float | None = None
    ) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        self._send(message)
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str, timeout: float | None = None) -> dict[str, Any]:
        seen = next((e for e in self.events if e["method"] == method), None)
        deadline = time.monotonic() + (timeout or self.timeout)
        while seen is None:
            event = self._read(deadline)
            if "method" in event:
                self.events.append(event)
                if event["method"] == method:
                    seen = event
        return seen

    # ------------------------------------------------------------------ page
    def open(self, path: Path) -> float:
        """Load a local file; returns seconds until the load event."""
        self.events = [e for e in self.events if e["method"] != "Page.loadEventFired"]
        start = time.monotonic()
        self.call("Page.navigate", {"url": path.resolve().as_uri()})
        self.wait_for("Page.loadEventFired")
        return time.monotonic() - start

    def eval(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            height = int(self.eval("document.documentElement.scrollHeight"))
            params["clip"] = {"x": 0, "y": 0, "width": self.width, "height": min(height, 8000), "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def errors(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and error log entries seen so far."""
        self.eval("0")  # drain events already sent
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(
                    "console: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"])
                )
            elif e["method"] == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:500])
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out
