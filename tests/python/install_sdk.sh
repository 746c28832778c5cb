#!/bin/sh
# Makes a fresh venv from Debian's python3 and installs clients/python into it, with no
# package registry: grpcio, protobuf, optuna, pandas and pytest come from the Debian packages
# (--system-site-packages), the build uses Debian's setuptools, protoc and grpc_python_plugin.
# The package is built from a copy under the venv, so the source tree gets no build/ folder.
# usage: install_sdk.sh REPO_ROOT VENV_DIR [PYTHON]
set -eu
root="$1"
venv="$2"
python="${3:-/usr/bin/python3}"

for module in venv grpc google.protobuf setuptools pip; do
  if ! "$python" -c "import $module" 2>/dev/null; then
    echo "install_sdk.sh: $python cannot import $module (scripts/dev.sh deps installs the Debian packages)" >&2
    exit 1
  fi
done

"$python" -m venv --system-site-packages --clear --without-pip "$venv"
mkdir -p "$venv/src"
cp -R "$root/clients/python" "$venv/src/evoscale"
rm -rf "$venv/src/evoscale/build" "$venv/src/evoscale/"*.egg-info
# pip from Debian's python3-pip (seen through the system site packages) installs into the venv.
EVOSCALE_PROTO_DIR="$root/proto" "$venv/bin/python" -m pip install \
  --no-build-isolation --no-index --no-deps --disable-pip-version-check --quiet "$venv/src/evoscale"
"$venv/bin/python" -c "import evoscale.v1.study_pb2_grpc, evoscale.integration.optuna; print('evoscale installed in $venv')"
