"""Headless Chromium driven over the DevTools protocol, for the tests that look at pages as a person would.

Debian's `chromium` (scripts/bootstrap installs it) listens on 127.0.0.1 only, on a port it
picks itself and writes to DevToolsActivePort in its profile directory. Every wait is bounded;
`close` ends the browser's whole process group, whatever happened before.
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import websocket

EXECUTABLES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT = 30.0  # seconds any one wait may take


def find_chromium() -> str | None:
    return next((found for found in map(shutil.which, EXECUTABLES) if found), None)


class BrowserError(Exception):
    pass


class Browser:
    def __init__(self, executable: str, profile: Path) -> None:
        self.log = profile / "chromium.log"
        arguments = [
            executable,
            "--headless=new",
            "--no-sandbox",  # tests may run as root (CI containers); the pages are the project's own files
            "--disable-gpu",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--hide-scrollbars",
            "--mute-audio",
            "about:blank",
        ]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        try:
            port, path = self._wait_for_port(profile / "DevToolsActivePort")
            self.socket = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=TIMEOUT, suppress_origin=True)
        except BaseException:
            self.close()
            raise
        self.next_id = 0
        self.events: list[dict] = []

    def _wait_for_port(self, file: Path) -> tuple[str, str]:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrowserError(f"chromium exited with {self.process.returncode}: {self.log.read_text(errors='replace')[-2000:]}")
            lines = file.read_text().splitlines() if file.exists() else []
            if len(lines) >= 2:
                return lines[0], lines[1]
            time.sleep(0.05)
        raise BrowserError(f"chromium did not open its DevTools port within {TIMEOUT} s")

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """One DevTools command and its result; events that arrive meanwhile are kept."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            reply = json.loads(self.socket.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise BrowserError(f"{method}: no answer within {TIMEOUT} s")

    def page(self, width: int, height: int) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        return Page(self, session)

    def close(self) -> None:
        socket = getattr(self, "socket", None)
        if socket is not None:
            socket.close()
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser, self.session = browser, session

    def navigate(self, url: str) -> None:
        """Open `url` and wait until it has loaded."""
        self.browser.send("Page.navigate", {"url": url}, self.session)
        deadline = time.monotonic() + TIMEOUT
        while self.evaluate("document.readyState + ' ' + location.href") != f"complete {url}":
            if time.monotonic() > deadline:
                raise BrowserError(f"{url} did not load within {TIMEOUT} s")
            time.sleep(0.05)

    def evaluate(self, expression: str) -> object:
        result = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, self.session)
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, clip: dict | None = None) -> Path:
        """A PNG of the viewport, or of `clip` ({x, y, width, height} in page pixels)."""
        params: dict = {"format": "png"}
        if clip:
            params |= {"clip": clip | {"scale": 1}, "captureBeyondViewport": True}
        data = self.browser.send("Page.captureScreenshot", params, self.session)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def _events(self, *methods: str) -> list[dict]:
        return [e for e in self.browser.events if e.get("sessionId") == self.session and e.get("method") in methods]

    def console_errors(self) -> list[str]:
        """Uncaught exceptions, console.error and console.assert calls, and errors the browser logged."""
        found = []
        for event in self._events("Runtime.exceptionThrown", "Runtime.consoleAPICalled", "Log.entryAdded"):
            params = event["params"]
            if event["method"] == "Runtime.exceptionThrown":
                found.append(str(params["exceptionDetails"]))
            elif event["method"] == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                found.append(str(params["args"]))
            elif event["method"] == "Log.entryAdded" and params["entry"]["level"] == "error":
                found.append(params["entry"]["text"])
        return found

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self._events("Network.requestWillBeSent")]
