#!/usr/bin/env bash
# Builds a container image holding Debian's Python and python3-torch, from this machine's own
# files, with no registry: for the PyTorch-in-a-container test (tests/integration/
# test_containers.py). Usage: scripts/torch-image.sh [NAME]  (default localhost/trainq-torch:1)
set -euo pipefail
name=${1:-localhost/trainq-torch:1}
command -v podman >/dev/null || { echo "torch-image: podman is missing (apt install podman runc)" >&2; exit 1; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "torch-image: python3-torch is missing (apt install python3-torch)" >&2; exit 1; }
root=$(mktemp -d /tmp/trainq-torch-image.XXXXXX)
trap 'rm -rf "$root"' EXIT
py=$(/usr/bin/python3 -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')
files=$(mktemp "$root.list.XXXXXX")
trap 'rm -rf "$root" "$files"' EXIT
{
  echo /usr/bin/python3; readlink -f /usr/bin/python3
  echo /usr/lib/$py; echo /usr/lib/python3/dist-packages
  echo /bin/sh; readlink -f /bin/sh; echo /etc/passwd; echo /etc/group
  # Every shared library Python and the compiled modules it may import load.
  find /usr/lib/python3/dist-packages /usr/lib/$py -name '*.so*' -print0 |
    { xargs -0 ldd 2>/dev/null || true; } | awk '/=> \//{print $3} /^\t\//{print $1}'
  # Links out of the packages (torch/lib/*.so are links to the system's libtorch).
  find /usr/lib/python3/dist-packages -type l
  ldd /usr/bin/python3 | awk '/=> \//{print $3} /^\t\//{print $1}'
} | sort -u > "$files"
# Debian 12 is merged-/usr: each path by its place under /usr (a library's soname link too),
# and the file it resolves to; /bin, /lib and /lib64 are links into /usr, as on the host.
# A link chain (libX.so -> libX.so.1 -> libX.so.1.2) is taken hop by hop.
while read -r f; do
  [ -e "$f" ] || continue
  for hop in 1 2 3 4 5 6 7 8; do
    echo "$(readlink -f "$(dirname "$f")")/$(basename "$f")"
    [ -L "$f" ] || break
    t=$(readlink "$f")
    case $t in /*) f=$t ;; *) f=$(dirname "$f")/$t ;; esac
  done
done < "$files" | sort -u | tar -C / --files-from=- -cf - 2>/dev/null | tar -C "$root" -xf -
mkdir -p "$root/tmp"
for d in bin lib lib64 sbin; do [ -e "$root/$d" ] || ln -s "usr/$d" "$root/$d"; done
tar -C "$root" -cf "$root.tar" .
podman import --change 'ENV PATH=/usr/bin:/bin' "$root.tar" "$name" >/dev/null
rm -f "$root.tar"
echo "$name"
