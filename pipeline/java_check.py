"""Whether a Java that Spark can use is installed, asked before a pipeline job starts Spark (whose
own failure without Java is a long Py4J trace that does not say what to do).

PySpark 4 needs Java 17 or later: `JAVA_HOME/bin/java` when JAVA_HOME is set (as Spark's scripts
use it), else `java` on PATH. Stateless; runs `java -version` once per call.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

MIN_JAVA = 17
_HOW = "install a JDK or JRE 17+ (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or point JAVA_HOME at one"


def java_major(version_text: str) -> int | None:
    """The major version in `java -version`'s output ('1.8.0_392' is 8, '17.0.9' is 17)."""
    found = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def java_problem(environ: dict[str, str] | None = None) -> str | None:
    """What is wrong with the Java Spark would use, with how to fix it; None when it will do."""
    env = os.environ if environ is None else environ
    home = env.get("JAVA_HOME", "")
    if home:
        java = str(Path(home) / "bin" / "java")
        if not Path(java).is_file():
            return f"JAVA_HOME={home} holds no bin/java: {_HOW}"
    else:
        found = shutil.which("java", path=env.get("PATH"))
        if found is None:
            return f"Spark needs Java {MIN_JAVA} or later and no java is on PATH: {_HOW}"
        java = found
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run {java} -version ({exc}): {_HOW}"
    major = java_major(done.stderr + done.stdout)
    if major is None:
        return f"{java} -version did not say its version: {_HOW}"
    if major < MIN_JAVA:
        return f"{java} is Java {major}; Spark needs {MIN_JAVA} or later: {_HOW}"
    return None
