#!/usr/bin/env bash
# Makes the release packages of the kvidx C ABI in OUTDIR (default: <repo>/build/dist):
#   kvidx-VERSION-OS-ARCH.tar.gz   a relocatable prefix, kvidx-VERSION-OS-ARCH/:
#       include/kvidx.h, include/kvidx.hpp
#       lib/libkvidx.so.VERSION (stripped), libkvidx.so.MAJOR and libkvidx.so (symlinks),
#       lib/libkvidx.a (debug info stripped)
#       lib/pkgconfig/kvidx.pc, kvidx-static.pc (prefix=${pcfiledir}/../.., so it can move)
#       lib/cmake/kvidx/ (find_package(kvidx); finds the prefix from its own location)
#       LICENSE, NOTICE, SHA256SUMS (the checksum of every other file of the archive)
#   kvidx_VERSION_DEBARCH.deb      (Linux with dpkg-deb) the same files installed under /usr:
#       /usr/include, /usr/lib (pkg-config, CMake and the dynamic loader search it as is),
#       /usr/share/doc/kvidx/{LICENSE,NOTICE}
#   SHA256SUMS                     the checksums of the archives above (`sha256sum -c SHA256SUMS`)
# The files come from scripts/install.sh (release build, reused when already built), staged
# with DESTDIR so the .pc files name /usr, not the staging folder.
# Usage: bash scripts/package.sh [OUTDIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
outdir="${1:-$root/build/dist}"
mkdir -p "$outdir"
outdir="$(cd "$outdir" && pwd)"
cd "$root"

for tool in strip tar gzip sha256sum; do
  command -v "$tool" >/dev/null || { echo "package: $tool is required" >&2; exit 1; }
done

version="$(sed -n 's/^#define KVIDX_VERSION "\(.*\)"$/\1/p' include/kvidx.h)"
[ -n "$version" ] || { echo "package: no KVIDX_VERSION in include/kvidx.h" >&2; exit 1; }
os="$(uname -s | tr '[:upper:]' '[:lower:]')"
arch="$(uname -m)"
name="kvidx-$version-$os-$arch"
# Archive timestamps: the last commit's, so two runs on one commit make the same files.
mtime="$(git log -1 --format=%ct 2>/dev/null || echo 0)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
stage="$work/deb"
DESTDIR="$stage" bash scripts/install.sh /usr
usr="$stage/usr"

# Strip: the shared library keeps its dynamic symbols (the C ABI), the archive its symbols.
shopt -s nullglob
for so in "$usr"/lib/libkvidx.so.*.*.* "$usr"/lib/libkvidx.*.dylib; do
  [ -L "$so" ] || strip --strip-unneeded "$so" 2>/dev/null || strip -x "$so"
done
strip --strip-debug "$usr/lib/libkvidx.a" 2>/dev/null || strip -S "$usr/lib/libkvidx.a"
shopt -u nullglob

if grep -rlF "$work" "$usr" >/dev/null; then
  echo "package: the staging folder is named in: $(grep -rlF "$work" "$usr")" >&2
  exit 1
fi

# make_tar DIR PARENT OUT: DIR (under PARENT) as OUT, entries sorted, owned by root.
make_tar() {
  tar -C "$2" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" -cf - "$1" |
    gzip -9n >"$3"
}

# --- the tarball: the /usr tree with relocatable pkg-config files ---------------------------
tree="$work/tar/$name"
mkdir -p "$tree"
cp -a "$usr/include" "$usr/lib" "$tree/"
sed -i 's|^prefix=.*$|prefix=${pcfiledir}/../..|' "$tree"/lib/pkgconfig/*.pc
install -m 644 LICENSE NOTICE "$tree/"
(cd "$tree" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort |
  xargs sha256sum >SHA256SUMS)
make_tar "$name" "$work/tar" "$outdir/$name.tar.gz"
artifacts=("$name.tar.gz")

# --- the Debian package ---------------------------------------------------------------------
if [ "$os" = linux ] && command -v dpkg-deb >/dev/null && command -v dpkg >/dev/null; then
  debarch="$(dpkg --print-architecture)"
  install -d "$usr/share/doc/kvidx" "$stage/DEBIAN"
  install -m 644 LICENSE NOTICE "$usr/share/doc/kvidx/"
  # What dpkg-shlibdeps would find: the newest glibc symbol version the library uses.
  glibc="$(objdump -T "$usr/lib/libkvidx.so.$version" | grep -o 'GLIBC_[0-9.]*' |
    sed 's/GLIBC_//' | sort -V | tail -n 1)"
  size_kib="$(du -sk "$usr" | cut -f1)"
  cat >"$stage/DEBIAN/control" <<EOF
Package: kvidx
Version: $version
Architecture: $debarch
Section: libs
Priority: optional
Maintainer: kvidx maintainers <kvidx@users.noreply.github.com>
Installed-Size: $size_kib
Depends: libc6 (>= $glibc), libgcc-s1
Description: global index of the KV blocks cached by LLM inference workers (C ABI)
 The kvidx C ABI: the shared and static libraries, include/kvidx.h and the
 C++17 wrapper kvidx.hpp, pkg-config files (kvidx, kvidx-static) and the CMake
 package (find_package(kvidx)).
EOF
  # The dynamic loader's cache is refreshed by libc-bin's ldconfig trigger.
  echo "activate-noawait ldconfig" >"$stage/DEBIAN/triggers"
  find "$stage" -type d -exec chmod 755 {} +
  chmod 644 "$stage/DEBIAN/control" "$stage/DEBIAN/triggers"
  deb="kvidx_${version}_$debarch.deb"
  SOURCE_DATE_EPOCH="$mtime" dpkg-deb --root-owner-group -Zxz --build "$stage" "$outdir/$deb" >/dev/null
  artifacts+=("$deb")
else
  echo "package: no Debian package on this system (needs Linux with dpkg-deb)"
fi

(cd "$outdir" && sha256sum "${artifacts[@]}" >SHA256SUMS)
echo "package: kvidx $version in $outdir:"
(cd "$outdir" && ls -l "${artifacts[@]}" SHA256SUMS | awk '{print "  " $5 "  " $9}')
