#!/usr/bin/env bash
# Installs everything sluice needs to build, run and test on Debian 12.
# Idempotent: does nothing when everything is already there.
#
# promtool (the tests check the daemons' /metrics and the alert rules with it) is unpacked from
# Debian's prometheus package into var/tools/bin, where the test scripts look first. The package
# itself is not installed: on a systemd machine that would also enable a Prometheus server on
# port 9090 on every interface.
#
# Packages need root: run it as root, or as a user with sudo. Without either it prints the
# command to run as root and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS=var/tools/bin
PKGS=(
  build-essential pkg-config
  librdkafka-dev libsqlite3-dev libcurl4-openssl-dev libjansson-dev libsodium-dev
  libmicrohttpd-dev check libsubunit-dev
  sqlite3 curl kafkacat python3 python3-confluent-kafka
  tzdata  # /usr/share/zoneinfo, read by common/calendar.c
  gnuplot-nox  # bench/compare's plots
  libpcre2-dev  # PCRE2: schema "pattern"s are ECMA-262 regexes, matched by common/jsonschema.c
  clang libclang-rt-14-dev  # `make fuzz`: libFuzzer and its sanitizers (tests/fuzz/)
  chromium  # the console's browser test (tests/e2e/e2e_console.c drives it headless over a pipe)
  iproute2  # ip: tests/run-e2e.sh brings up the loopback of each driver's network namespace
)

die() {
  echo "install-deps: $*" >&2
  exit 1
}

if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  SUDO=(none)
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${SUDO[*]}" = none ]; then
    {
      echo "install-deps: missing packages: ${missing[*]}"
      echo "install-deps: not root and no sudo; run this as root, then run it again:"
      echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
    } >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# promtool: already on PATH (e.g. the prometheus package of an earlier install) or unpacked here.
if [ -x "$TOOLS/promtool" ]; then
  exit 0
fi
if command -v promtool >/dev/null 2>&1; then
  if [ -d /run/systemd/system ] && systemctl is-enabled --quiet prometheus 2>/dev/null; then
    echo "install-deps: note: the prometheus package's server is enabled (port 9090 on every" \
         "interface); sluice only needs promtool. If you do not use it:" \
         "systemctl disable --now prometheus && systemctl mask prometheus" >&2
  fi
  exit 0
fi
echo "install-deps: unpacking promtool from the prometheus package into $TOOLS"
tmp=$(mktemp -d)
chmod 0755 "$tmp" # apt-get download as root writes it as the _apt user
trap 'rm -rf "$tmp"' EXIT
# apt-get download needs no root, only the package lists (apt-get update).
if ! (cd "$tmp" && apt-get download -qq prometheus) >&2; then
  die "cannot download the prometheus package; run 'apt-get update' as root, then this again"
fi
dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
[ -x "$tmp/root/usr/bin/promtool" ] || die "the prometheus package has no usr/bin/promtool"
mkdir -p "$TOOLS"
install -m 0755 "$tmp/root/usr/bin/promtool" "$TOOLS/promtool"
"$TOOLS/promtool" --version >/dev/null 2>&1 || die "$TOOLS/promtool does not run"
echo "install-deps: promtool in $TOOLS"
