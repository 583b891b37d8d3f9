#!/usr/bin/env bash
# Build KenLM's lmplz and build_binary, and its query library (for the C++ sampling
# runner), from the source distribution of the same kenlm version that the Python module in
# the venv comes from, and cache them outside the clone:
#   ${XDG_CACHE_HOME:-~/.cache}/compgen/kenlm/<version>/bin/{lmplz,build_binary}
#   ${XDG_CACHE_HOME:-~/.cache}/compgen/kenlm/<version>/query/{lib,include}
# Nothing is done when all of them are already there. Needs cmake, a C++ compiler and the
# Boost/compression headers; missing Debian packages are installed with apt-get (as root, or
# through sudo). Environment: KENLM_VERSION (default: the installed kenlm module's version),
# PYTHON (default: .venv/bin/python, else python3), JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
JOBS=${JOBS:-2}

version=${KENLM_VERSION:-}
if [ -z "$version" ]; then
  version=$("$PY" -c 'import importlib.metadata as m; print(m.version("kenlm"))' 2>/dev/null || true)
fi
if [ -z "$version" ]; then
  echo "install_kenlm: the kenlm Python module is not installed in $PY; install compgen first" \
       "(scripts/setup.sh) or set KENLM_VERSION" >&2
  exit 1
fi

cache=${XDG_CACHE_HOME:-$HOME/.cache}/compgen/kenlm/$version
bin=$cache/bin
query=$cache/query
# compgen runs the cached binaries only when they match the digest record written below
# (bin.sha256, the record format of compgen.system.cache): binaries without one (an older
# install, or planted) are built again
recorded() {
  "$PY" -c 'import sys; from pathlib import Path; from compgen.system import cache
entry = Path(sys.argv[1]); data = cache.recorded(entry)
sys.exit(0 if data and not entry.is_symlink() and cache.digest(entry) == data["sha256"] else 1)' "$1"
}
if [ -x "$bin/lmplz" ] && [ -x "$bin/build_binary" ] && [ -f "$query/lib/libkenlm.a" ] \
   && recorded "$bin"; then
  echo "kenlm $version: lmplz, build_binary and the query library already in $cache"
  exit 0
fi

# Build dependencies: apt-get only when a header (or tool) is really missing.
missing=()
need() { [ -e "$1" ] || missing+=("$2"); }
need /usr/include/boost/program_options.hpp libboost-program-options-dev
need /usr/include/boost/system/error_code.hpp libboost-system-dev
need /usr/include/boost/thread.hpp libboost-thread-dev
need /usr/include/boost/test/unit_test.hpp libboost-test-dev
need /usr/include/zlib.h zlib1g-dev
need /usr/include/bzlib.h libbz2-dev
need /usr/include/lzma.h liblzma-dev
command -v cmake >/dev/null || missing+=(cmake)
command -v c++ >/dev/null || missing+=(g++)
command -v make >/dev/null || missing+=(make)
if [ ${#missing[@]} -gt 0 ]; then
  echo "== apt-get install ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kenlm-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

sdist=$cache/kenlm-$version.tar.gz
if [ ! -f "$sdist" ]; then
  echo "== downloading the kenlm $version source distribution"
  # `--no-binary kenlm` rather than `:all:`: the latter also forces kenlm's build
  # requirements (cmake, setuptools) to be compiled from source just to read its metadata.
  "$PY" -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary kenlm "kenlm==$version" -d "$work/dl"
  mkdir -p "$cache"
  cp "$work"/dl/kenlm-"$version".tar.gz "$sdist.tmp"
  mv "$sdist.tmp" "$sdist"
fi

echo "== building lmplz, build_binary and the query library (kenlm $version, -j$JOBS)"
start=$(date +%s)
tar -xzf "$sdist" -C "$work"
src=$work/kenlm-$version
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release >"$work/cmake.log" 2>&1 \
  || { tail -n 30 "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/build" --target lmplz build_binary kenlm kenlm_util -j"$JOBS" >"$work/make.log" 2>&1 \
  || { tail -n 30 "$work/make.log" >&2; exit 1; }

# Install atomically: a half-copied bin/ must never look complete to compgen.
staging=$cache/bin.$$
rm -rf "$staging"
mkdir -p "$staging"
install -m 755 "$work/build/bin/lmplz" "$work/build/bin/build_binary" "$staging/"
rm -rf "$bin" "$bin.sha256"
mv -T "$staging" "$bin"
"$PY" -c 'import sys; from pathlib import Path; from compgen.system import cache
cache.record(Path(sys.argv[1]))' "$bin"

# The query library: static libs plus the headers of lm/ and util/ (KENLM_MAX_ORDER is
# recorded for the runner's build, which must compile with the same value).
staging=$cache/query.$$
rm -rf "$staging"
mkdir -p "$staging/lib" "$staging/include"
find "$work/build" -name 'libkenlm*.a' -exec install -m 644 {} "$staging/lib/" \;
(cd "$src" && find lm util -name '*.hh' -o -name '*.h' | grep -v -e '/test' -e '_test' \
   | xargs -I{} install -D -m 644 {} "$staging/include/{}")
max_order=$(sed -n 's/^KENLM_MAX_ORDER:STRING=//p' "$work/build/CMakeCache.txt")
echo "${max_order:-6}" > "$staging/max_order"
rm -rf "$query"
mv -T "$staging" "$query"
echo "kenlm $version: lmplz, build_binary and the query library built in" \
     "$(( $(date +%s) - start )) s -> $cache"
