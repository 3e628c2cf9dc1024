#!/usr/bin/env bash
# Writes go.mod and go.sum of a Go module of its own (outside the clone, as a user's) that uses
# the binding through a `replace` line pointing at this clone's bindings/go, as docs/go.md
# shows; the binding's own dependency (purego) is required at the binding's version and go.sum
# is the binding's, so nothing is downloaded.
# Usage: bash scripts/go-consumer-module.sh DIR [MODULE]   (default MODULE: example.com/app)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$1"
module="${2:-example.com/app}"
purego_req="$(sed -nE 's/^(require)?[[:space:]]*(github\.com\/ebitengine\/purego v[^ ]+).*/\2/p' "$root/bindings/go/go.mod" | head -n 1)"
[ -n "$purego_req" ] || { echo "go-consumer-module: no purego requirement in bindings/go/go.mod" >&2; exit 1; }
mkdir -p "$dir"
cat >"$dir/go.mod" <<EOF
module $module

go 1.26

require github.com/kvidx/kvidx/bindings/go v0.0.0

require $purego_req // indirect

replace github.com/kvidx/kvidx/bindings/go => $root/bindings/go
EOF
cp "$root/bindings/go/go.sum" "$dir/go.sum"
