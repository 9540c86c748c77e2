#!/usr/bin/env bash
# make demo: builds carve and the demo, then runs the demo inside the test VM
# (this machine's kernel has no device-mapper) on a blank, file-backed disk.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
out=_output/demo
mkdir -p "$out"
# shellcheck source=goenv.sh
source scripts/goenv.sh
go build -o "$out/carve" ./cmd/carve
go build -o "$out/demo" ./test/demo
exec scripts/vm/run.sh --disks 1 --disk-size 2G -- "$out/demo" --disk /dev/vda --carve "$repo/$out/carve"
