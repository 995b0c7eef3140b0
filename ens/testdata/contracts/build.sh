#!/bin/sh
# Recompiles the test contracts into build/ (ABI and bytecode, committed).
# solc comes from npm and runs offline once installed.
set -eu
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
node compile.js
