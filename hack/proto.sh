#!/usr/bin/env bash
# Regenerates the Go stubs of the conformance echo backend's gRPC contract
# (test/conformance-images/echo-basic/grpcecho.proto) into
# test/conformance-images/echo-basic/grpcechoserver/.
#
# protoc comes from the distribution (apt-get install protobuf-compiler when
# missing); the two Go plugins are built from the Go module proxy, at pinned
# versions, into ${PORTICO_CACHE:-$HOME/.cache/portico}/tools/ (outside the
# repository, built once and reused). Running the script twice gives no diff.
#
# Usage: hack/proto.sh
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # the modules need Go 1.27: fetched from the Go module proxy
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${PORTICO_CACHE:-$HOME/.cache/portico}
DIR=$CACHE/tools
PROTOC_GEN_GO_VERSION=v1.36.12  # keep equal to google.golang.org/protobuf in go.mod
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
SRC=$ROOT/test/conformance-images/echo-basic

if ! command -v protoc >/dev/null 2>&1; then
  echo "proto: protoc not found, installing protobuf-compiler" >&2
  if [ "$(id -u)" -eq 0 ]; then
    apt-get install -y protobuf-compiler
  else
    sudo apt-get install -y protobuf-compiler
  fi
fi

# tool NAME PACKAGE VERSION: prints the path of NAME built from PACKAGE@VERSION.
tool() {
  local name=$1 pkg=$2 version=$3
  local bin=$DIR/$name-$version
  if [ ! -x "$bin" ]; then
    mkdir -p "$DIR/tmp-$name"
    echo "proto: building $pkg@$version (first time only)" >&2
    GOBIN="$DIR/tmp-$name" CGO_ENABLED=0 go install "$pkg@$version"
    mv "$DIR/tmp-$name/$name" "$bin"
    rmdir "$DIR/tmp-$name"
  fi
  echo "$bin"
}

gen_go=$(tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION")
gen_go_grpc=$(tool protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION")

# protoc runs inside echo-basic/ so that the file registers as
# "grpcecho.proto" (the generated File_grpcecho_proto symbol depends on it).
cd "$SRC"
protoc -I . \
  --plugin=protoc-gen-go="$gen_go" \
  --plugin=protoc-gen-go-grpc="$gen_go_grpc" \
  --go_out=grpcechoserver --go_opt=paths=source_relative \
  --go-grpc_out=grpcechoserver --go-grpc_opt=paths=source_relative \
  grpcecho.proto
echo "proto: generated $SRC/grpcechoserver/grpcecho.pb.go and grpcecho_grpc.pb.go" >&2
