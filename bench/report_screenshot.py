"""Render a run's report.html in headless Chromium: a screenshot, and no console errors.

    python bench/report_screenshot.py RUN_DIR [--out shot.png]

Needs Debian's `chromium` (apt-get install chromium). Chromium runs with the network off
(--disable-background-networking and a proxy that goes nowhere), so a page that tried to load
anything from outside would log an error. Exits 1 on any console error or failed load.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, help="screenshot path (default RUN_DIR/report.png)")
    args = parser.parse_args()
    page = (args.run_dir / "report.html").resolve()
    shot = (args.out or args.run_dir / "report.png").resolve()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("chromium not found: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--proxy-server=127.0.0.1:9",
                "--enable-logging=stderr",
                "--v=0",
                f"--user-data-dir={profile}",
                "--window-size=1100,3000",
                f"--screenshot={shot}",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line]
    errors = [
        line
        for line in proc.stderr.splitlines()
        if re.search(r"CONSOLE.*(error|Uncaught)|net::ERR_|Failed to load", line, re.I)
    ]
    print(
        f"chromium exit {proc.returncode}; screenshot {shot} "
        f"({shot.stat().st_size if shot.exists() else 0} bytes); "
        f"{len(console)} console messages, {len(errors)} errors"
    )
    for line in errors:
        print("  " + line)
    return 0 if proc.returncode == 0 and shot.exists() and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
