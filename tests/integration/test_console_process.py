"""`rocketstore console --local-pair` as `make console` runs it without a compose cluster: it starts
a SYNC_MASTER and its slave, serves the console on 127.0.0.1 (a page needs a log-in, the log-in
page carries the security headers), and SIGTERM stops the console and both brokers."""

from __future__ import annotations

import re
import socket
import urllib.error
import urllib.request

from console_support import ConsoleProcess, listening_addresses


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _refused(endpoint: str) -> bool:
    host, port = endpoint.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_the_console_on_a_local_pair_serves_and_stops_with_it(tmp_path):
    pair: list[str] = []

    class Console(ConsoleProcess):
        def on_line(self, line: str) -> None:
            if line.startswith("local pair in "):
                pair.extend(re.findall(r"(?:master|slave) (\S+?)[,;]", line))
            super().on_line(line)

    console = Console(["--local-pair", str(tmp_path / "pair")], tmp_path / "console.log")
    try:
        assert len(pair) == 2 and not any(_refused(e) for e in pair), console.log()
        port = int(console.url.rsplit(":", 1)[1])
        assert listening_addresses(port) == {"127.0.0.1"}
        with urllib.request.urlopen(console.url + "/login", timeout=10) as page:
            assert page.status == 200 and "Log in" in page.read().decode()
            assert page.headers["Content-Security-Policy"].startswith("default-src 'none'")
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            opener.open(console.url + "/cluster", timeout=10)
            raise AssertionError("the cluster page answered without a log-in")
        except urllib.error.HTTPError as answer:
            assert answer.code == 302 and answer.headers["Location"].startswith("/login")
    finally:
        code = console.stop()
    assert code == 0, console.log()
    assert all(_refused(e) for e in pair), "a broker of the pair outlived the console"
