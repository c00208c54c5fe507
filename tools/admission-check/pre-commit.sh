#!/usr/bin/env bash
# pre-commit's entry for the admission-check hook (.pre-commit-hooks.yaml): checks the staged
# manifests pre-commit passes as arguments. It runs the binary $ADMISSION_CHECK names when set
# (a prebuilt one: CI images, the tests); otherwise it builds admission-check once in pre-commit's
# clone of this repository (cargo, release) and reuses that build on every later run.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${ADMISSION_CHECK:-$repo/target/release/admission-check}"
if [ -z "${ADMISSION_CHECK:-}" ] && [ ! -x "$bin" ]; then
  echo "admission-check: building it once in $repo (cargo build --release)" >&2
  cargo build --release --locked --quiet --manifest-path "$repo/Cargo.toml" -p admission-check >&2
fi
exec "$bin" "$@"
