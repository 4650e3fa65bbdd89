#!/usr/bin/env bash
# Moves a Carve server's configuration and history to a new data directory (docs/operations.md,
# "Export and import"). Run as an admin (CARVE_SERVER and CARVE_TOKEN set, or from the directory
# where `carve dev` wrote carve-data/).
set -euo pipefail
out="${1:?usage: move-server.sh EXPORT_DIR NEW_DATA_DIR}"
data="${2:?usage: move-server.sh EXPORT_DIR NEW_DATA_DIR}"
carve export all --out "$out"
# Stop the old server here if the new one takes its place, then:
carve import "$out" --data "$data"
echo "start it with: carve server --data $data; then carve audit verify"
