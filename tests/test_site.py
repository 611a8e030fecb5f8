"""The documentation site in a real browser, offline.

The site is built (``mkdocs build --strict``, one notebook executed at the test size), served on
127.0.0.1, and opened in headless Chromium driven through the DevTools protocol over a pipe
(``--remote-debugging-pipe``: standard library only, no driver). For the home page, the maths
page, an API page, a notebook page and the benchmarks page the test takes a screenshot (kept in
``ATTNFLOW_SITE_SCREENSHOTS`` when that is set) and checks what a reader sees: KaTeX rendered
every formula and left no TeX in the text or the table of contents, code fits its box, the
notebook shows its outputs and figure, and no request left 127.0.0.1.

The same build serves the checks of what the site holds: every page, every public name in the
API reference with a docstring (moved here from test_docs, so the suite builds the site once).

Chromium must be installed (Debian: ``apt-get install -y chromium``); ``CHROMIUM`` names another
binary.
"""

import base64
import fcntl
import functools
import http.server
import importlib.util
import json
import math
import os
import re
import select
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import griffe
import pytest

# Builds the site and drives a browser.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings_handlers.python")
pytest.importorskip("jupytext")

# The notebook executed for the site in this test: small, and it draws a figure.
NOTEBOOK = "fig6"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]


def _chromium() -> str:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    pytest.skip(
        "Chromium is needed to check the site: apt-get update && apt-get install -y "
        "--no-install-recommends chromium (Debian), or CHROMIUM=path"
    )


class Browser:
    """Headless Chromium driven through the DevTools protocol on file descriptors 3 and 4."""

    def __init__(self, executable: str, profile: Path):
        to_browser_read, self._write = os.pipe()
        self._read, from_browser_write = os.pipe()

        def pipes_to_3_and_4():
            # Both ends first go above 100, so that neither is overwritten by the other's dup2
            # (they may themselves be 3 or 4). Popen's own error pipe is not 3 or 4: those are
            # open in this process (at the latest, the two pipes above) when Popen creates it.
            high = [
                fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in (to_browser_read, from_browser_write)
            ]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.process = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=pipes_to_3_and_4,
            pass_fds=(3, 4),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Network", "Runtime"):
            self.call(f"{domain}.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=1280,
            height=1000,
            deviceScaleFactor=1,
            mobile=False,
        )

    def _message(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            if not select.select([self._read], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: bool = False, timeout: float = 60.0, **params):
        self._next_id += 1
        request = {"id": self._next_id, "method": method, "params": params}
        if session:
            request["sessionId"] = self.session
        os.write(self._write, json.dumps(request).encode() + b"\0")
        while True:
            message = self._message(timeout)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def evaluate(self, expression: str):
        result = self.call(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, ready: str = "true", timeout: float = 60.0) -> None:
        """Load ``url`` and wait until the page has loaded and ``ready`` (JavaScript) holds."""
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate(f"document.readyState === 'complete' && Boolean({ready})"):
                time.sleep(0.5)  # fonts and images settle
                return
            time.sleep(0.2)
        raise TimeoutError(f"{url}: not ready ({ready}) after {timeout} s")

    def requested_urls(self) -> list[str]:
        return [
            event["params"]["request"]["url"]
            for event in self.events
            if event.get("method") == "Network.requestWillBeSent"
        ]

    def failed_requests(self) -> list[str]:
        return [
            event["params"].get("errorText", "")
            for event in self.events
            if event.get("method") == "Network.loadingFailed"
        ]

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(
            self.call("Page.captureScreenshot", session=True, format="png")["data"]
        )
        path.write_bytes(data)
        return data

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._read)
        os.close(self._write)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        "ATTNFLOW_QUICK": "1",
        "ATTNFLOW_DOCS_EXECUTE": NOTEBOOK,
        "ATTNFLOW_DOCS_CACHE": str(tmp_path_factory.mktemp("notebook-outputs")),
    }
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, "mkdocs build --strict failed:\n" + result.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    browser = Browser(_chromium(), tmp_path_factory.mktemp("chromium-profile"))
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    folder = os.environ.get("ATTNFLOW_SITE_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


RENDERED = "[...document.querySelectorAll('.arithmatex')].every(e => e.querySelector('.katex'))"
MATHS_READY = f"document.querySelectorAll('.arithmatex').length > 0 && {RENDERED}"
TEXT = "document.querySelector('article').innerText"
TOC = "(document.querySelector('.md-sidebar--secondary') || document.body).innerText"


def _visit(browser, server, shots, path, name, ready="true"):
    browser.open(server + path, ready=ready)
    png = browser.screenshot(shots / f"{name}.png")
    assert png.startswith(b"\x89PNG") and len(png) > 10_000, f"{name}: an empty screenshot"
    outside = [u for u in browser.requested_urls() if urlparse(u).hostname not in ("127.0.0.1",)]
    outside = [u for u in outside if not u.startswith(("data:", "blob:", "about:"))]
    assert outside == [], f"{name} requested outside 127.0.0.1: {outside}"
    assert browser.failed_requests() == [], f"{name}: failed requests"
    assert browser.evaluate("[...document.images].every(i => i.complete && i.naturalWidth > 0)"), (
        f"{name}: an image did not load"
    )


def test_home_page(browser, server, shots):
    _visit(browser, server, shots, "/", "home")
    assert "attnflow" in browser.evaluate(TEXT)
    # Every code block fits its box: nothing is cut off or needs scrolling.
    widths = browser.evaluate(
        "[...document.querySelectorAll('article pre > code')]"
        ".map(c => [c.scrollWidth, c.clientWidth])"
    )
    assert widths, "the home page has no code block"
    assert all(scroll <= client + 1 for scroll, client in widths), widths
    # No web font: with `font: false` the page uses the system's fonts.
    assert not browser.evaluate("[...document.fonts].some(f => /Roboto/.test(f.family))")


def test_maths_page(browser, server, shots):
    _visit(browser, server, shots, "/maths/", "maths", ready=MATHS_READY)
    rendered = browser.evaluate("document.querySelectorAll('.katex').length")
    display = browser.evaluate("document.querySelectorAll('.katex-display').length")
    errors = browser.evaluate("document.querySelectorAll('.katex-error').length")
    assert rendered > 200 and display > 20 and errors == 0, (rendered, display, errors)
    # The KaTeX fonts came from the site itself and were used.
    assert browser.evaluate(
        "[...document.fonts].some(f => f.family.includes('KaTeX') && f.status === 'loaded')"
    )
    # No TeX left for the reader: rendered formulas carry their source only in MathML
    # annotations, which innerText skips.
    text = browser.evaluate(TEXT)
    for raw in ("$$", "\\(", "\\[", "\\frac", "\\beta", "\\tag"):
        assert raw not in text, raw
    browser.evaluate("document.getElementById('math-1-2').scrollIntoView()")
    browser.screenshot(shots / "maths-section-1-2.png")
    toc = browser.evaluate(TOC)
    assert "1.2 SA with Q = K = V = I" in toc
    assert "\\" not in toc and "$" not in toc, toc
    # Equation tags are shown: (SA) of section 1.2.
    assert browser.evaluate(
        "[...document.querySelectorAll('.katex-display .katex-tag')]"
        ".some(t => t.textContent.trim() === '(SA)')"
    )


def test_api_page(browser, server, shots):
    _visit(browser, server, shots, "/api/solve/", "api", ready=RENDERED)
    assert browser.evaluate("Boolean(document.getElementById('attnflow.solve'))")
    assert browser.evaluate("document.querySelectorAll('.doc-signature, .doc-contents').length") > 2
    assert browser.evaluate("document.querySelectorAll('.katex-error').length") == 0


def test_notebook_page(browser, server, shots):
    _visit(browser, server, shots, f"/notebooks/{NOTEBOOK}/", "notebook")
    text = browser.evaluate(TEXT)
    assert "jupytext:" not in text and "format_version" not in text, "the jupytext header shows"
    assert "executed at the test size" in text
    # A figure the notebook drew, saved when the site was built, is on the page and loaded.
    figures = browser.evaluate(
        f"[...document.images].filter(i => i.src.includes('{NOTEBOOK}_files/'))"
        ".map(i => [i.naturalWidth, i.naturalHeight])"
    )
    assert figures and all(w > 200 and h > 100 for w, h in figures), figures
    # What the cells printed is on the page: τ*_β at β = 0.5, the zero of cos τ = (√(1 + 4β²) − 1)
    # / (2β), which the notebook prints with 12 decimals.
    beta = 0.5
    tau_star = math.acos((math.sqrt(1 + 4 * beta**2) - 1) / (2 * beta))
    assert f"{tau_star:.12f}" in text
    browser.evaluate(f"document.querySelector('img[src*=\"{NOTEBOOK}_files/\"]').scrollIntoView()")
    browser.screenshot(shots / "notebook-figure.png")


def test_notebook_text_keeps_stars(site):
    """``t*(β)`` and ``β*(t)`` stay as written instead of becoming emphasis."""
    html = (site / "notebooks" / "fig3" / "index.html").read_text()
    assert "t*(β)" in html and "β*(t)" in html
    assert "<em>(β)" not in html


def test_benchmarks_page(browser, server, shots):
    _visit(browser, server, shots, "/benchmarks/", "benchmarks")
    text = browser.evaluate(TEXT)
    for log_word in ("Session", "session", "issue", "lent"):
        assert log_word not in text, log_word
    assert browser.evaluate("document.querySelectorAll('article table').length") >= 4
    assert browser.evaluate("[...document.images].some(i => i.src.endsWith('work_precision.png'))")


def test_site_references_nothing_on_the_network(site):
    """No page, script or stylesheet of the built site loads anything from another host."""
    for path in site.rglob("*"):
        if path.suffix not in (".html", ".css", ".js") or "search" in path.parts:
            continue
        text = path.read_text(errors="replace")
        for marker in ('<script src="http', '<link href="http', "@import url(http", "fonts.g"):
            assert marker not in text, f"{path.relative_to(site)}: {marker}"


def _docs_hooks():
    spec = importlib.util.spec_from_file_location(
        "attnflow_docs_hooks", ROOT / "docs" / "_hooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# What the site holds (one build serves these and the browser tests above).


def test_site_builds_strict_with_every_page(site):
    for page in ["index", "getting-started/index", "maths/index", "conventions/index"]:
        assert (site / f"{page}.html").exists() or (site / page.replace("/index", ".html")).exists()
    for notebook in (ROOT / "notebooks").glob("*.py"):
        assert (site / "notebooks" / notebook.stem / "index.html").exists(), notebook.name
    assert (site / "benchmarks" / "index.html").exists()


def test_every_public_name_is_in_the_api_reference(site):
    """Each public name of attnflow, attnflow.theory and attnflow.plot has its own entry
    (heading id ``attnflow.NAME``) in the API reference, rendered from a non-empty docstring."""
    html = "\n".join(p.read_text() for p in (site / "api").rglob("*.html"))
    anchors = set(re.findall(r'id="(attnflow[\w.]*)"', html))
    names = _docs_hooks().public_names()
    assert len(names) > 80
    missing = [name for name in names if name not in anchors]
    assert not missing, f"public names missing from the API reference: {missing}"

    extensions = griffe.load_extensions(
        f"{ROOT / 'docs' / '_griffe_examples.py'}:AttnflowDocstrings"
    )
    loader = griffe.GriffeLoader(search_paths=[str(ROOT)], extensions=extensions)
    package = loader.load("attnflow")
    loader.resolve_aliases(implicit=True, external=False)
    undocumented = []
    for name in names:
        obj = package
        for part in name.split(".")[1:]:
            obj = obj.members[part]
        if obj.docstring is None or not obj.docstring.value.strip():
            undocumented.append(name)
    assert not undocumented, f"public names without a docstring: {undocumented}"
