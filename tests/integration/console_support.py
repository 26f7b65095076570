"""Rigs for the web console's browser tests: `rocketstore console` as a process on 127.0.0.1 (port
chosen by the OS, read from its ready line), Debian's headless Chromium driven through its own
chromedriver (selenium is given both paths, so it downloads nothing), and the screenshots each
test saves as artifacts.

Screenshots go to $ROCKETSTORE_CONSOLE_SCREENSHOTS, else build/console-screenshots/ in the
checkout (ignored by git); the test prints the directory.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import sys
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from support import LineProcess, wait_until

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1440,1000",
)


def screenshot_dir() -> Path:
    where = Path(os.environ.get("ROCKETSTORE_CONSOLE_SCREENSHOTS") or ROOT / "build" / "console-screenshots")
    where.mkdir(parents=True, exist_ok=True)
    return where


def replaced(element) -> bool:
    """Whether `element` has left the document (the page it was on was replaced). Chromedriver
    says so with a stale-element error, or, when it asks about the node while the old document is
    being torn down, with an inspector error that the node does not belong to the document."""
    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        if "does not belong to the document" in (exc.msg or ""):
            return True
        raise
    return False


class ConsoleProcess(LineProcess):
    """`rocketstore console` with its log in `log_path`; `url` once it said it is ready."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        self.url = ""
        super().__init__([sys.executable, "-m", "rocketstore.cli", "console", "--port", "0", *args], log_path)
        if not self.wait_for(lambda: bool(self.url), timeout_s=60):
            self.kill()
            raise AssertionError(f"the console did not say it is ready (exit {self.proc.returncode}):\n{self.log()}")

    def on_line(self, line: str) -> None:
        if "console ready: " in line:
            self.url = line.split("ready: ", 1)[1].split()[0].rstrip("/")

    def log(self) -> str:
        return self.stderr()

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; its exit status."""
        self.kill(signal.SIGTERM)
        return self.proc.returncode


def listening_addresses(port: int) -> set[str]:
    """The IPv4 and IPv6 addresses with a socket listening on `port` (from /proc/net/tcp*)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(address)
                words = b"".join(
                    raw[i : i + 4][::-1] for i in range(0, len(raw), 4)
                )  # each 32-bit word is little-endian
                found.add(str(ipaddress.ip_address(words)) if len(raw) == width // 2 else address)
    return found


def chromium(profile_dir: Path) -> WebDriver:
    """Headless Chromium with a fresh profile; an AssertionError saying what is missing when the
    browser or its driver is not installed (the tests fail then, they never skip)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        assert Path(path).exists(), f"{path} is missing: apt-get install chromium chromium-driver (.ci/run does)"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (*CHROMIUM_ARGS, f"--user-data-dir={profile_dir}"):
        options.add_argument(arg)
    try:
        return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    except WebDriverException as exc:
        raise AssertionError(f"headless Chromium did not start: {exc.msg}") from None


class Browser:
    """A driver on one console: pages by path, the text of elements, screenshots by name."""

    def __init__(self, driver: WebDriver, url: str, shots: Path, prefix: str) -> None:
        self.driver = driver
        self.url = url
        self.shots = shots
        self.prefix = prefix

    def open(self, path: str) -> None:
        self.driver.get(self.url + path)

    def text(self, css: str = "body") -> str:
        return self.driver.find_element(By.CSS_SELECTOR, css).text

    def texts(self, css: str) -> list[str]:
        return [e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css)]

    def fill(self, css: str, value: str) -> None:
        field = self.driver.find_element(By.CSS_SELECTOR, css)
        field.clear()
        field.send_keys(value)

    def click(self, css: str) -> None:
        """Click what does not leave the page (a checkbox)."""
        self.driver.find_element(By.CSS_SELECTOR, css).click()

    def follow(self, css: str, by: str = By.CSS_SELECTOR) -> None:
        """Click a link or a submit button and wait until the next page has replaced this one."""
        old = self.driver.find_element(By.TAG_NAME, "html")
        self.driver.find_element(by, css).click()
        WebDriverWait(self.driver, 60).until(lambda _driver: replaced(old))

    def log_in(self, account: str, password: str) -> None:
        self.open("/")
        self.fill("#login-account", account)
        self.fill("#login-password", password)
        self.follow("#login-submit")
        assert self.driver.find_elements(By.ID, "account"), self.text()

    def shows(self, path: str, condition, timeout_s: float = 60, what: str = "the page") -> object:
        """Open `path` until `condition(self)` is truthy (the page reloaded each try)."""

        def look():
            self.open(path)
            return condition(self)

        return wait_until(look, timeout_s=timeout_s, what=what)

    def screenshot(self, name: str) -> Path:
        path = self.shots / f"{self.prefix}{name}.png"
        self.driver.save_screenshot(str(path))
        return path
