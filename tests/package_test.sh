#!/usr/bin/env bash
# package_test.sh BUILD SOURCE - flashcl as a user gets it: installed with
# `cmake --install --prefix` into a temporary folder, then the consumer
# project (tests/consumer) built against it with find_package(flashcl) and,
# separately, with pkg-config, and run; then the Debian package (cpack -G DEB)
# checked for its files and, when this runs as root on a machine without a
# flashcl package, installed with dpkg -i, the consumer built and run both
# ways against it, and the package removed again.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/flashcl-package-XXXXXX)
trap 'rm -rf "$work"' EXIT

consumer_both_ways() { # $1: what, $2: prefix (CMake search path), $3: PKG_CONFIG_PATH
  cmake -S "$src/tests/consumer" -B "$work/cmake-$1" -DCMAKE_PREFIX_PATH="$2" >/dev/null
  cmake --build "$work/cmake-$1" >/dev/null
  echo "find_package ($1): $("$work/cmake-$1/consumer")"
  local cflags libs libdir
  cflags=$(PKG_CONFIG_PATH="$3" pkg-config --cflags flashcl)
  libs=$(PKG_CONFIG_PATH="$3" pkg-config --libs flashcl)
  libdir=$(PKG_CONFIG_PATH="$3" pkg-config --variable=libdir flashcl)
  # shellcheck disable=SC2086  # the flags are words
  cc -std=c11 $cflags "$src/tests/consumer/consumer.c" $libs -lm -o "$work/pc-$1"
  echo "pkg-config ($1): $(LD_LIBRARY_PATH="$libdir" "$work/pc-$1")"
}

# 1. an install into a prefix that is not the configured one
cmake --install "$build" --prefix "$work/prefix" >/dev/null
pc=$(find "$work/prefix" -name flashcl.pc)
consumer_both_ways prefix "$work/prefix" "$(dirname "$pc")"

# ... and moved elsewhere afterwards (the .pc and CMake files are relocatable)
mv "$work/prefix" "$work/moved"
consumer_both_ways moved "$work/moved" "$(dirname "${pc/prefix/moved}")"

# ... and the optional MPI part, where it was built: component mpi into the
# same kind of prefix, a consumer with find_package(flashcl COMPONENTS mpi)
# and one with pkg-config flashcl-mpi, each run as one rank
if [ -e "$build/libflashcl_mpi.a" ]; then
  cmake --install "$build" --prefix "$work/mpi" >/dev/null
  cmake --install "$build" --prefix "$work/mpi" --component mpi >/dev/null
  cmake -S "$src/tests/consumer_mpi" -B "$work/cmake-mpi" -DCMAKE_PREFIX_PATH="$work/mpi" >/dev/null
  cmake --build "$work/cmake-mpi" >/dev/null
  echo "find_package (mpi component): $("$work/cmake-mpi/consumer_mpi")"
  pcdir=$(dirname "$(find "$work/mpi" -name flashcl-mpi.pc)")
  # shellcheck disable=SC2046  # the flags are words
  cc -std=c11 $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags flashcl-mpi) \
     "$src/tests/consumer_mpi/consumer_mpi.c" $(PKG_CONFIG_PATH="$pcdir" pkg-config --libs flashcl-mpi) \
     -o "$work/pc-mpi"
  echo "pkg-config (flashcl-mpi): $(LD_LIBRARY_PATH="$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=libdir flashcl)" "$work/pc-mpi")"
fi

# 2. the Debian package
(cd "$build" && cpack -G DEB -B "$work/deb" >/dev/null)
deb=$(find "$work/deb" -maxdepth 1 -name 'flashcl_*.deb')
[ -n "$deb" ] || { echo "no .deb was made" >&2; exit 1; }
contents=$(dpkg-deb --contents "$deb")
for f in usr/include/flashcl.h libflashcl.so libflashcl.a pkgconfig/flashcl.pc \
         cmake/flashcl/flashclConfig.cmake usr/bin/flashcl-info; do
  grep -q "$f" <<< "$contents" || { echo "$deb lacks $f" >&2; exit 1; }
done
# the MPI part is installed only on request, so the package needs no MPI
if grep -q flashcl_mpi <<< "$contents"; then echo "$deb holds flashcl_mpi" >&2; exit 1; fi
echo "package: $(basename "$deb") ($(dpkg-deb --field "$deb" Depends))"
if [ "$(id -u)" -eq 0 ] && ! dpkg-query -W -f='${Status}' flashcl 2>/dev/null | grep -q installed; then
  dpkg -i "$deb" >/dev/null
  trap 'dpkg -r flashcl >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
  consumer_both_ways dpkg /usr ""
  dpkg -r flashcl >/dev/null
else
  echo "package not installed: needs root and no flashcl package already there"
fi
