#!/usr/bin/env bash
# Make sure the operating system's Chromium is there for the console's browser tests
# (tests/console: Playwright drives it; Playwright's own browser download is never used).
#
# Quick and silent when Chromium is installed. Otherwise installs Debian's `chromium` with
# apt-get, as root or through password-less sudo, non-interactively. When that is not
# possible it says why, records the reason in .shepherd/chromium-unavailable (the browser
# tests skip with it) and exits 0: a missing browser must not stop the rest of `make test`.
set -uo pipefail

REASON_FILE="${SHEPHERD_STATE_DIR:-.shepherd}/chromium-unavailable"

found() {
  for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then return 0; fi
  done
  return 1
}

unavailable() {
  mkdir -p "$(dirname "$REASON_FILE")"
  printf '%s\n' "$1" >"$REASON_FILE"
  echo "ensure-chromium: $1 (the console's browser tests will be skipped)" >&2
  exit 0
}

if [[ -n "${SHEPHERD_CHROMIUM:-}" ]]; then
  [[ -x "$SHEPHERD_CHROMIUM" ]] || unavailable "SHEPHERD_CHROMIUM=$SHEPHERD_CHROMIUM is not an executable"
  rm -f "$REASON_FILE"
  exit 0
fi
if found; then
  rm -f "$REASON_FILE"
  exit 0
fi

command -v apt-get >/dev/null 2>&1 \
  || unavailable "Chromium is not installed and this system has no apt-get to install it (install Chromium, or set SHEPHERD_CHROMIUM to its path)"

if [[ "$(id -u)" -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  unavailable "Chromium is not installed, and installing it needs root (run: sudo apt-get install chromium)"
fi

apt_get() {
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -y -q "$@"
}

echo "ensure-chromium: installing Debian's chromium for the console's browser tests..." >&2
log="$(mktemp)"
# The package lists may be missing or stale (a fresh container): refresh them once if needed.
if ! apt_get install --no-install-recommends chromium >"$log" 2>&1; then
  if ! { apt_get update && apt_get install --no-install-recommends chromium; } >>"$log" 2>&1; then
    tail -n 5 "$log" >&2
    rm -f "$log"
    unavailable "apt-get could not install chromium (see the lines above)"
  fi
fi
rm -f "$log"
found || unavailable "apt-get installed chromium but no chromium command is on PATH"
rm -f "$REASON_FILE"
echo "ensure-chromium: $(chromium --version 2>/dev/null || echo chromium) installed" >&2
