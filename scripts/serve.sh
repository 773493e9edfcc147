#!/usr/bin/env bash
# `make serve`: a local Prefect server (SQLite, 127.0.0.1:4200) and the process serving every
# deployment. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
HOST=${PREFECT_HOST:-127.0.0.1}
PORT=${PREFECT_PORT:-4200}
export PREFECT_HOME=${PREFECT_HOME:-$PWD/data/prefect}
export PREFECT_API_URL="http://$HOST:$PORT/api"
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
mkdir -p "$PREFECT_HOME"
.venv/bin/prefect server start --host "$HOST" --port "$PORT" > "$PREFECT_HOME/server.log" 2>&1 &
SERVER=$!
trap 'kill -INT $SERVE 2>/dev/null; kill $SERVER 2>/dev/null; wait' EXIT INT TERM
for _ in $(seq 1 60); do
  curl -sf "$PREFECT_API_URL/health" >/dev/null && break
  sleep 1
done
echo "Prefect UI: http://$HOST:$PORT   (server log: $PREFECT_HOME/server.log)"
echo "In another shell:  export PREFECT_API_URL=$PREFECT_API_URL; .venv/bin/prefect deployment run anonymize/demo"
.venv/bin/python -m anonymask.deploy.serve &
SERVE=$!
wait $SERVE
