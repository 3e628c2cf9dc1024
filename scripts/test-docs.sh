#!/usr/bin/env bash
# The docs check: what README.md and docs/*.md tell a reader to run works from a clone.
#  1. Every fenced block opened with ```bash runnable is run, each in a fresh `bash -euo
#     pipefail` from the repository root (so a block cannot lean on exports of another).
#     Long commands run in a short form, listed in SHORT below and printed when used.
#  2. Nothing in the repository points outside it: no tracked file names the sibling folder
#     "shared" (as a relative path from the clone), which a clone does not have, and every
#     relative link of a tracked Markdown file resolves to a file of the repository.
#     Figures the build decides (how many functions the library exports, the libraries' sizes)
#     are not written in README.md, ARCHITECTURE.md or docs/*.md: a runnable block prints them.
#  3. The API docs build without warnings: RUSTDOCFLAGS="-D warnings" cargo doc; from the root
#     with no -p (what `cargo doc --no-deps --open` does) they are the index's, the kvidx crate.
# Usage: bash scripts/test-docs.sh [--list]   (--list prints the blocks and runs nothing)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi
# The walkthroughs of docs/bridge.md and docs/replicas.md start Debian's nats-server (in /usr/sbin).
if ! command -v nats-server >/dev/null && [ -x /usr/sbin/nats-server ]; then export PATH="$PATH:/usr/sbin"; fi

# Short forms: "documented command prefix|what the check runs instead". The prefix must be a
# whole command line of a block, or that line's start followed by a space.
SHORT=(
  "bash scripts/run-main.sh|bash scripts/run-main.sh --quick"
  "bash scripts/test-all.sh|echo 'test-docs: scripts/test-all.sh is the suite running this check; not run again'"
  "cd bindings/go && go test -run '^\$' -bench . -benchtime 1s|cd bindings/go && go test -run '^\$' -bench . -benchtime 1x"
  "cd examples/go-router && go run . -addr 127.0.0.1:8080 -backend positional -event-threads 2 -block-size 16 -load-weight 4|cd examples/go-router && go build -o /dev/null . && echo 'test-docs: the router builds (a server: not started here)'"
)

pass=0
fail() { echo "test-docs: FAIL: $*" >&2; exit 1; }
ok() { pass=$((pass + 1)); echo "ok - $*"; }

# extract FILE: prints one record per runnable block: "FILE:LINE" then the block, then a NUL.
extract() {
  awk -v file="$1" '
    /^```bash runnable[[:space:]]*$/ { inblock = 1; start = NR; printf "%s:%d\n", file, NR; next }
    inblock && /^```[[:space:]]*$/ { inblock = 0; printf "%c", 0; next }
    inblock { print }
    END { if (inblock) { printf "unterminated block at %s:%d\n", file, start > "/dev/stderr"; exit 1 } }
  ' "$1"
}

# shorten: applies SHORT to each line of a block on stdin.
shorten() {
  local line entry from to
  while IFS= read -r line; do
    for entry in "${SHORT[@]}"; do
      from="${entry%%|*}"; to="${entry#*|}"
      if [ "$line" = "$from" ] || [[ "$line" == "$from "* && "${line#"$from "}" =~ ^[[:space:]]*# ]]; then
        echo "# short form of: $line" >&2
        line="$to"
      fi
    done
    printf '%s\n' "$line"
  done
}

blocks=0
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for file in README.md docs/*.md; do
  while IFS= read -r -d '' record; do
    where="${record%%$'\n'*}"
    body="${record#*$'\n'}"
    blocks=$((blocks + 1))
    if [ "${1:-}" = "--list" ]; then
      printf '== %s\n%s\n' "$where" "$body"
      continue
    fi
    script="$(printf '%s' "$body" | shorten 2>>"$log")"
    echo "== $where"
    started=$SECONDS
    if ! (cd "$root" && env -u KVIDX_LIBRARY_PATH -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH -u CGO_LDFLAGS \
      timeout 1200 bash -euo pipefail -c "$script") >"$log.out" 2>&1; then
      tail -40 "$log.out"
      fail "the block at $where failed"
    fi
    tail -3 "$log.out" | sed 's/^/   | /'
    ok "$where ($((SECONDS - started)) s)"
  done < <(extract "$file")
done
rm -f "$log.out"
[ "${1:-}" = "--list" ] && exit 0
[ "$blocks" -ge 3 ] || fail "only $blocks runnable blocks found in README.md and docs/"

# 2. No reference outside the repository (the needle is built so this file does not hold it).
needle="$(printf '%s%s' '..' '/shared')"
if git ls-files -z | xargs -0 grep -n -F "$needle" -- 2>/dev/null; then
  fail "tracked files refer to $needle (outside the repository)"
fi
ok "no tracked file refers to $needle"
# Every relative link of a tracked Markdown file names a file or folder of the repository.
broken=0
while IFS= read -r md; do
  dir="$(dirname "$md")"
  while IFS= read -r target; do
    target="${target%%#*}"
    case "$target" in ''|http://*|https://*|mailto:*) continue ;; esac
    if [ ! -e "$dir/$target" ]; then
      echo "test-docs: $md links to $target, which is not in the repository" >&2
      broken=$((broken + 1))
    fi
  done < <(grep -o '\]([^)[:space:]]*)' "$md" | sed 's/^\](//; s/)$//')
done < <(git ls-files '*.md')
[ "$broken" -eq 0 ] || fail "$broken Markdown links point outside the repository or nowhere"
ok "every relative Markdown link resolves inside the repository"
# Figures that drift with every build: an export count, a library's size.
if grep -nE 'kvidx_\*` functions[^|]*\([0-9]+\)|[0-9]+ (exported )?`?kvidx_\*`? functions|libkvidx\.(so|a)`? (is )?[0-9.]+ ?([KMG]i?B)' \
  README.md ARCHITECTURE.md docs/*.md; then
  fail "the docs state an export count or a library size: print it from a runnable block instead"
fi
ok "no export count or library size written in the docs"

# 3. API docs without warnings; the root's are the index's (target/doc/kvidx/index.html).
root_doc="$(RUSTDOCFLAGS="-D warnings" cargo doc --no-deps 2>&1)" ||
  { echo "$root_doc" >&2; fail "cargo doc --no-deps from the root failed"; }
grep -qE 'Generated .*/doc/kvidx/index\.html' <<<"$root_doc" ||
  { echo "$root_doc" >&2; fail "cargo doc --no-deps from the root does not document the kvidx crate"; }
ok "cargo doc --no-deps from the root generates doc/kvidx/index.html"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet ||
  fail "cargo doc --workspace reports warnings"
ok "RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --no-deps"
echo "test-docs: $pass passed, 0 failed"
