#!/usr/bin/env bash
# python_install_test.sh BUILD SOURCE - the Python package as README.md
# installs it: a copy of the source tree's python/ beside the build (as
# ./python and ./build), the README's two commands (a venv seeing Debian's
# packages, pip install --no-build-isolation ./python; no package index),
# then, from elsewhere and without FLASHCL_LIBRARY, the README's example and
# python/examples/attention_example.py with the installed package, which
# must load the library copied into it, and flashcl.check() (--quick) with the
# flashcl-check program bundled with it.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/flashcl-python-XXXXXX)
trap 'rm -rf "$work"' EXIT
unset FLASHCL_LIBRARY PYTHONPATH
mkdir "$work/tree"
cp -r "$src/python" "$work/tree/python"
rm -rf "$work/tree/python/build" "$work/tree/python"/*.egg-info
ln -s "$build" "$work/tree/build"

cd "$work/tree"
python=/usr/bin/python3
[ -x "$python" ] || python=python3
"$python" -m venv --system-site-packages "$work/venv"
PIP_NO_INDEX=1 "$work/venv/bin/pip" install -q --no-build-isolation ./python

cd "$work"
where=$("$work/venv/bin/python" -c 'import flashcl; print(flashcl.library_path)')
echo "installed package loads $where"
case $where in
  "$work/venv/"*) ;;
  *) echo "the installed package did not load its own library copy" >&2; exit 1 ;;
esac
awk '/^## Python/ {on = 1} on && /^```python/ {grab = 1; next} grab && /^```/ {exit} grab' \
  "$src/README.md" > "$work/readme_example.py"
[ "$(wc -l < "$work/readme_example.py")" -eq 5 ] || { echo "README example is not 5 lines" >&2; exit 1; }
echo "README example: $("$work/venv/bin/python" "$work/readme_example.py")"
"$work/venv/bin/python" "$src/python/examples/attention_example.py"
# flashcl.check() runs the flashcl-check program bundled into the package
check=$("$work/venv/bin/python" -c 'import flashcl._check as c; print(c.program())')
case $check in
  "$work/venv/"*) echo "installed package runs $check" ;;
  *) echo "the installed package did not bundle flashcl-check ($check)" >&2; exit 1 ;;
esac
"$work/venv/bin/python" -c 'import flashcl, sys; sys.exit(0 if flashcl.check(quick=True) else 1)'
