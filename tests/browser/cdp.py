"""A small Chrome DevTools Protocol client for tests: headless Chromium, standard library only.

Usage::

    from cdp import Browser, BrowserError

    with Browser() as b:                                   # starts Debian's headless chromium
        page = b.open("file:///abs/path/index.html")      # returns once the load event has fired
        title = page.eval("document.title")               # a JSON value (promises are awaited)
        missing = page.broken_images()                    # src of every <img> that did not load
        page.screenshot("/tmp/shot.png", 1280, 800)       # PNG; full page by default

API
---
``Browser(executable=None, timeout=30.0, args=())``
    A context manager. ``executable``: the browser to run (default: ``$TOKDYN_CHROMIUM``, else
    ``chromium``, ``chromium-browser``, ``google-chrome`` on ``PATH``). ``timeout``: seconds allowed
    for any one command, for start-up and for each page load. ``args``: extra command-line flags.
    Exiting the ``with`` block (or ``close()``) ends the browser and everything it started and
    removes its temporary profile; so does the interpreter's exit if ``close()`` was never called.

``Browser.open(url, width=1280, height=800) -> Page``
    A new tab with that viewport, navigated to ``url``; waits for its ``load`` event. A failed
    navigation (a missing file: ``net::ERR_FILE_NOT_FOUND``) or no load within ``timeout`` raises
    ``BrowserError``.

``Page.navigate(url)``
    Loads another URL in the same tab (faster than a new tab per page) and waits for its load event,
    with the same errors as ``open``.

``Page.eval(js)``
    ``Runtime.evaluate`` of the expression ``js`` with ``returnByValue`` and ``awaitPromise``: the
    result as a Python value (``undefined`` is ``None``). A JavaScript exception raises
    ``JavaScriptError`` (a ``BrowserError``) with its description.

``Page.screenshot(path, width=1280, height=800, full_page=True)``
    Sets the viewport to width × height CSS pixels and writes a PNG to ``path``: the whole page
    (at least ``height`` tall, at most 16384 pixels) or, with ``full_page=False``, the viewport.
    Returns ``(width, height)`` of the image.

``Page.broken_images() -> list[str]``
    The ``src`` of every ``<img>`` that has not loaded (not ``complete`` or ``naturalWidth == 0``),
    in document order.

``Page.close()``
    Closes the tab (optional: the browser's exit closes every tab).

``Browser.send(method, params=None, session=None, timeout=None)`` / ``Page.send(method, params)``
    Any other CDP command; returns its ``result`` dictionary.

Errors are ``BrowserError`` (a ``RuntimeError``): no browser installed (the message says
``apt-get install chromium``), the browser exiting early (the message ends with the tail of its
stderr), a command or page load timing out, a CDP error reply.

How it talks to the browser: ``--remote-debugging-pipe``, i.e. the browser reads JSON commands
from its file descriptor 3 and writes replies and events to its file descriptor 4, each message
terminated by a NUL byte. No port is opened and no network is needed. Flags: ``--headless=new``,
``--disable-gpu``, ``--no-sandbox`` when running as root (Chromium's sandbox refuses root), a
fresh ``--user-data-dir`` in a temporary folder, and switches that keep it from contacting
anything (no background networking, component updates, sync or first-run pages).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref

__all__ = ["Browser", "Page", "BrowserError", "JavaScriptError"]

_MAX_SCREENSHOT_HEIGHT = 16384


class BrowserError(RuntimeError):
    """Anything that went wrong while starting or talking to the browser."""


class JavaScriptError(BrowserError):
    """An exception thrown by the JavaScript that ``Page.eval`` ran."""


def find_browser(executable=None):
    """The path of the browser to run, or BrowserError saying how to install one."""
    candidates = [executable] if executable else (
        [os.environ["TOKDYN_CHROMIUM"]] if os.environ.get("TOKDYN_CHROMIUM") else
        ["chromium", "chromium-browser", "google-chrome"])
    for c in candidates:
        path = shutil.which(c)
        if path:
            return path
    raise BrowserError(f"no browser found (looked for {', '.join(candidates)} on PATH): install Debian's chromium "
                       "(sudo apt-get install --no-install-recommends chromium) or set TOKDYN_CHROMIUM")


def _high_dup(fd):
    """A close-on-exec duplicate of fd numbered 10 or above (never 3 or 4)."""
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)


class Browser:
    def __init__(self, executable=None, timeout=30.0, args=()):
        self.timeout = float(timeout)
        self._executable = executable
        self._args = list(args)
        self._proc = None
        self._tmp = None
        self._wfd = self._rfd = None
        self._reader = None
        self._lock = threading.Condition()
        self._next_id = 1
        self._replies = {}      # id -> message
        self._events = []       # every event, in arrival order
        self._dead = None       # why the connection ended
        self._send_lock = threading.Lock()
        self._finalizer = None

    # -- life cycle ------------------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def start(self):
        if self._proc is not None:
            return self
        exe = find_browser(self._executable)
        self._tmp = tempfile.mkdtemp(prefix="tokdyn-chromium.")
        profile = os.path.join(self._tmp, "profile")
        os.mkdir(profile)
        args = [exe, "--headless=new", "--disable-gpu", "--remote-debugging-pipe", f"--user-data-dir={profile}",
                "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
                "--disable-dev-shm-usage", "--disable-features=Translate,MediaRouter,OptimizationHints",
                "--metrics-recording-only", "--no-pings", "--mute-audio", "--hide-scrollbars",
                "--password-store=basic", "--use-mock-keychain", "--disable-crash-reporter"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")
        args += self._args
        args.append("about:blank")

        # Pipe A: we write commands, the browser reads them on its fd 3. Pipe B: it writes on fd 4.
        a_read, a_write = os.pipe()
        b_read, b_write = os.pipe()
        child_in, child_out = _high_dup(a_read), _high_dup(b_write)

        def to_fds_3_and_4():  # in the child, before exec: the pipe ends at the numbers Chromium expects
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        self._stderr_path = os.path.join(self._tmp, "stderr.log")
        try:
            with open(self._stderr_path, "wb") as err:
                # The original pipe ends (still open here) hold the lowest free numbers, so fds 3 and 4 exist
                # in this process while it forks: pass_fds keeps them open across exec in the child, where
                # to_fds_3_and_4 has pointed them at the pipes.
                self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                              pass_fds=(3, 4), preexec_fn=to_fds_3_and_4,
                                              start_new_session=True, env=self._env())
        except OSError as e:
            for fd in (a_read, a_write, b_read, b_write, child_in, child_out):
                os.close(fd)
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise BrowserError(f"cannot start {exe}: {e}") from e
        for fd in (a_read, b_write, child_in, child_out):
            os.close(fd)
        self._wfd, self._rfd = a_write, b_read
        # Whatever happens to this object, the browser and its profile go with the interpreter.
        self._finalizer = weakref.finalize(self, Browser._cleanup, self._proc, self._tmp, [self._wfd, self._rfd])
        self._reader = threading.Thread(target=self._read_loop, name="cdp-reader", daemon=True)
        self._reader.start()
        try:
            self.version = self.send("Browser.getVersion")
        except BrowserError:
            self.close()
            raise
        return self

    @staticmethod
    def _env():
        env = dict(os.environ)
        env.pop("DISPLAY", None)  # headless: never talk to an X server that may be around
        env.pop("WAYLAND_DISPLAY", None)
        return env

    def close(self):
        """Ends the browser (gracefully, then by SIGKILL to its process group) and removes its profile."""
        if self._proc is None:
            return
        if self._dead is None and not Browser._exited(self._proc):
            try:
                self.send("Browser.close", timeout=5)
            except BrowserError:
                pass
        if self._finalizer is not None:
            self._finalizer()
        if self._reader is not None:
            self._reader.join(timeout=5)
        self._proc = None

    @staticmethod
    def _cleanup(proc, tmp, fds):
        try:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not Browser._exited(proc):
                time.sleep(0.05)
            # The browser is alive or an unreaped zombie, so its process group id is still ours to signal:
            # this ends the renderers and helpers it started too.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(tmp, ignore_errors=True)

    @staticmethod
    def _exited(proc):
        if proc.returncode is not None:
            return True
        try:  # WNOWAIT: look without reaping, so that the pid (and its group) stays reserved
            return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    # -- the pipe --------------------------------------------------------------------------------

    def _read_loop(self):
        buf = b""
        why = "the browser closed its DevTools pipe"
        try:
            while True:
                chunk = os.read(self._rfd, 1 << 16)
                if not chunk:
                    break
                buf += chunk
                while True:
                    end = buf.find(b"\0")
                    if end < 0:
                        break
                    raw, buf = buf[:end], buf[end + 1:]
                    try:
                        msg = json.loads(raw)
                    except ValueError:
                        continue
                    with self._lock:
                        if "id" in msg:
                            self._replies[msg["id"]] = msg
                        else:
                            self._events.append(msg)
                        self._lock.notify_all()
        except OSError as e:
            why = f"reading the DevTools pipe failed: {e}"
        with self._lock:
            self._dead = why
            self._lock.notify_all()

    def _stderr_tail(self, lines=8):
        try:
            with open(self._stderr_path, "rb") as f:
                text = f.read()[-4000:].decode("utf-8", "replace")
        except OSError:
            return ""
        tail = [l for l in text.splitlines() if l.strip()][-lines:]
        return ("; its stderr ends:\n  " + "\n  ".join(tail)) if tail else ""

    def _died(self, doing):
        status = ""
        try:  # without reaping it (see _cleanup)
            r = os.waitid(os.P_PID, self._proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) if self._proc else None
            if r is not None:
                status = (f" (exit status {r.si_status})" if r.si_code == os.CLD_EXITED else
                          f" (killed by signal {r.si_status})")
        except ChildProcessError:
            pass
        return BrowserError(f"{doing}: {self._dead}{status}{self._stderr_tail()}")

    def send(self, method, params=None, session=None, timeout=None):
        """Sends one CDP command and returns its result (a dict); BrowserError on an error reply or timeout."""
        if self._proc is None:
            raise BrowserError(f"{method}: the browser is not running (use Browser as a context manager or call start())")
        timeout = self.timeout if timeout is None else timeout
        with self._lock:
            if self._dead is not None:
                raise self._died(method)
            cid = self._next_id
            self._next_id += 1
        msg = {"id": cid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        try:
            with self._send_lock:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._wfd, view):]
        except OSError as e:
            raise BrowserError(f"{method}: writing to the browser failed ({e}){self._stderr_tail()}") from e
        deadline = time.monotonic() + timeout
        with self._lock:
            while cid not in self._replies:
                if self._dead is not None:
                    raise self._died(method)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrowserError(f"{method}: no reply from the browser within {timeout:g} s")
                self._lock.wait(left)
            reply = self._replies.pop(cid)
        if "error" in reply:
            err = reply["error"]
            raise BrowserError(f"{method}: {err.get('message', err)}" + (f" ({err['data']})" if err.get("data") else ""))
        return reply.get("result", {})

    def _wait_event(self, pred, timeout, what):
        """The first event (from the start of the log) for which pred holds; removes it and older ones."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for i, ev in enumerate(self._events):
                    if pred(ev):
                        del self._events[:i + 1]
                        return ev
                if self._dead is not None:
                    raise self._died(what)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrowserError(f"{what}: not within {timeout:g} s")
                self._lock.wait(left)

    # -- pages -----------------------------------------------------------------------------------

    def open(self, url, width=1280, height=800):
        """A new tab showing url, returned once its load event has fired."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, session)
        page.send("Page.enable")
        page.send("Page.setLifecycleEventsEnabled", {"enabled": True})
        page._set_viewport(width, height)
        page.navigate(url)
        return page


class Page:
    def __init__(self, browser, target, session):
        self.browser, self.target, self.session = browser, target, session
        self.url = None

    def send(self, method, params=None, timeout=None):
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def navigate(self, url):
        """Loads url in this tab and waits for its load event."""
        b = self.browser
        nav = self.send("Page.navigate", {"url": url})
        if nav.get("errorText"):
            raise BrowserError(f"cannot load {url}: {nav['errorText']}")
        loader, frame = nav.get("loaderId"), nav.get("frameId")
        what = f"loading {url} (no load event)"
        if loader:
            b._wait_event(lambda ev: ev.get("sessionId") == self.session and ev.get("method") == "Page.lifecycleEvent"
                          and ev["params"].get("name") == "load" and ev["params"].get("loaderId") == loader
                          and ev["params"].get("frameId") == frame, b.timeout, what)
        else:  # a same-document navigation: no new loader, so wait for the document's own load state
            self.send("Runtime.evaluate", {
                "expression": "new Promise(r => document.readyState === 'complete' ? r(true)"
                              " : window.addEventListener('load', () => r(true), {once: true}))",
                "awaitPromise": True, "returnByValue": True}, timeout=b.timeout)
        self.url = url
        return self

    def eval(self, js):
        """The value of the JavaScript expression js (awaited if a promise), as JSON-decoded Python data."""
        r = self.send("Runtime.evaluate", {"expression": js, "returnByValue": True, "awaitPromise": True,
                                           "userGesture": False})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            desc = (d.get("exception") or {}).get("description") or d.get("text", "exception")
            raise JavaScriptError(f"{js[:200]!r} threw: {desc}")
        return r.get("result", {}).get("value")

    def broken_images(self):
        """The src of every <img> that did not load (not complete, or naturalWidth 0)."""
        return self.eval("Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
                         ".map(i => i.currentSrc || i.getAttribute('src') || '')")

    def _set_viewport(self, width, height):
        self.send("Emulation.setDeviceMetricsOverride", {"width": int(width), "height": int(height),
                                                         "deviceScaleFactor": 1, "mobile": False})

    def screenshot(self, path, width=1280, height=800, full_page=True):
        """Writes a PNG of the page at a width × height viewport (the whole page with full_page)."""
        self._set_viewport(width, height)
        params = {"format": "png"}
        w, h = int(width), int(height)
        if full_page:
            h = min(max(h, self._settled_height()), _MAX_SCREENSHOT_HEIGHT)
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": w, "height": h, "scale": 1})
        data = base64.b64decode(self.send("Page.captureScreenshot", params)["data"])
        with open(path, "wb") as f:
            f.write(data)
        return w, h

    def _settled_height(self):
        """The document's height once its fonts are ready, every image is decoded and two animation
        frames have been laid out (a state the page reports, not a time waited): just after the load
        event a late image decode could still move the layout, and a full-page capture measured at
        once could cut the page short."""
        js = ("(async () => { await document.fonts.ready;"
              " await Promise.all(Array.from(document.images).map(i => i.decode().catch(() => null)));"
              " await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));"
              " return Math.ceil(Math.max(document.documentElement.scrollHeight,"
              " document.body ? document.body.scrollHeight : 0)); })()")
        return int(self.eval(js) or 0)

    def close(self):
        try:
            self.browser.send("Target.closeTarget", {"targetId": self.target})
        except BrowserError:
            pass
