#!/bin/sh
# Builds the Trainer v2.3.0 oracle to $1 (default /tmp/trainer-oracle): upstream's module from the
# Go module proxy, vendored into a scratch copy of this directory so that export.go.txt can be
# compiled into upstream's webhooks package (the module cache is read-only).
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-/tmp/trainer-oracle}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/go.mod" "$here/go.sum" "$here/main.go" "$work/"
cp "$here/../serve.go.txt" "$work/serve.go"
cd "$work"
go mod vendor
cp "$here/export.go.txt" vendor/github.com/kubeflow/trainer/v2/pkg/webhooks/zz_oracle_export.go
go build -mod=vendor -o "$out" .
