#!/usr/bin/env bash
# Installs the Debian packages trainq needs to build and test, only those missing.
# Usage: scripts/deps.sh build|test|package
set -euo pipefail
build=(cmake ninja-build make g++ pkg-config libboost-dev libsqlite3-dev nlohmann-json3-dev libcli11-dev
       libtomlplusplus-dev libspdlog-dev libfmt-dev libssl-dev libhiredis-dev)
test=(libgtest-dev libgmock-dev libbenchmark-dev clang clang-format libclang-rt-14-dev python3
      python3-pytest python3-pip python3-setuptools python3-wheel openssl redis-server redis-sentinel
      python3-torch git zsh fish man-db systemd task-spooler podman runc catatonit netavark uidmap busybox-static
      docker.io rsync chromium prometheus python3-websocket)
# `make deb`, `make wheel` and their test: CPack's dpkg-shlibdeps, lintian, bash-completion's
# folder, a virtual environment to install the wheel into.
package=(dpkg-dev lintian bash-completion python3-venv python3-pip python3-setuptools python3-wheel)
want=("${build[@]}")
[ "${1:-build}" = test ] && want+=("${test[@]}" "${package[@]}")
[ "${1:-build}" = package ] && want+=("${package[@]}")
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "trainq: installing Debian packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
