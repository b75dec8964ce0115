#!/usr/bin/env bash
# Builds kube-apiserver from the published k8s.io/kubernetes Go module and
# caches it, so that only a fresh machine pays the build (several minutes on
# two cores). Prints the binary's path on stdout.
#
#   tests/apiserver/build.sh            build if not cached
#   KUBE_APISERVER_CACHE=DIR ...        cache somewhere else
#   GO=/path/to/go ...                  use another Go toolchain
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/build"
version="$(grep -Eo '^[[:space:]]*(require[[:space:]]+)?k8s\.io/kubernetes v[0-9]+\.[0-9]+\.[0-9]+' "$src/go.mod" | awk '{print $NF}' | head -n 1)"
if [[ -z "$version" ]]; then
    echo "build.sh: no 'k8s.io/kubernetes vX.Y.Z' requirement in $src/go.mod" >&2
    exit 2
fi

cache="${KUBE_APISERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/maya-test}"
bin="$cache/kube-apiserver-$version"
if [[ -x "$bin" ]] && "$bin" --version >/dev/null 2>&1; then
    echo "$bin"
    exit 0
fi

go="${GO:-}"
if [[ -z "$go" ]]; then
    if command -v go >/dev/null 2>&1; then
        go="$(command -v go)"
    elif [[ -x /usr/local/go/bin/go ]]; then
        go=/usr/local/go/bin/go
    else
        echo "build.sh: no Go toolchain (install Go >= 1.26 or set GO=/path/to/go)" >&2
        exit 2
    fi
fi

mkdir -p "$cache"
tmp="$(mktemp "$cache/.kube-apiserver-$version.XXXXXX")"
trap 'rm -f "$tmp"' EXIT

major_minor="${version#v}"
major="${major_minor%%.*}"
minor="${major_minor#*.}"
minor="${minor%%.*}"
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"

echo "build.sh: building kube-apiserver $version into $bin (several minutes)" >&2
start=$SECONDS
(
    cd "$src"
    # -mod=readonly: the committed go.sum pins every module; a mismatch fails
    # instead of silently resolving something else.
    CGO_ENABLED=0 nice -n 10 "$go" build -mod=readonly -buildvcs=false -trimpath \
        -tags providerless -ldflags "$ldflags" -o "$tmp" .
)
chmod 755 "$tmp"
mv -f "$tmp" "$bin"
trap - EXIT
echo "build.sh: built in $((SECONDS - start)) s" >&2
echo "$bin"
