#!/usr/bin/env bash
# Installs everything sluice needs to build, run and test on Debian 12.
# Idempotent: does nothing when every package is already there.
set -euo pipefail
PKGS=(
  build-essential pkg-config
  librdkafka-dev libsqlite3-dev libcurl4-openssl-dev libjansson-dev libsodium-dev
  libmicrohttpd-dev check libsubunit-dev
  sqlite3 curl kafkacat python3 python3-confluent-kafka
  tzdata  # /usr/share/zoneinfo, read by common/calendar.c
  prometheus  # promtool: the tests check the daemons' /metrics output with it
  gnuplot-nox  # bench/compare's plots
  libpcre2-dev  # PCRE2: schema "pattern"s are ECMA-262 regexes, matched by common/jsonschema.c
  clang libclang-rt-14-dev  # `make fuzz`: libFuzzer and its sanitizers (tests/fuzz/)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
