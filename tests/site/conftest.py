"""The fixtures of the site's browser tests: the built site served on 127.0.0.1, and one Chromium."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.site.browser import CHROMIUM, DESKTOP, FLAGS, SITE


@pytest.fixture(scope="session")
def server():
    """The site over http on 127.0.0.1, a free port; stopped after the last test."""
    handler = functools.partial(_QuietHandler, directory=str(Path(SITE).resolve()))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """One Chromium with a fresh profile; every request it makes is recorded, and any request to a
    host other than 127.0.0.1 is recorded and refused (so no test waits on a network)."""
    from playwright.sync_api import sync_playwright

    requests: list[str] = []
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM,
            headless=True, args=FLAGS, viewport=DESKTOP, service_workers="block")

        def route(r):
            requests.append(r.request.url)
            host = urlsplit(r.request.url).hostname
            if urlsplit(r.request.url).scheme in ("data", "blob", "about") or host == "127.0.0.1":
                r.continue_()
            else:
                r.abort()
        context.route("**/*", route)
        context.on("request", lambda req: requests.append(req.url))
        yield context, requests
        context.close()


