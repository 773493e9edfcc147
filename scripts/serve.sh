#!/usr/bin/env bash
# `make serve`: a local Prefect server (SQLite, 127.0.0.1:4200) and the process serving every
# deployment. Ctrl-C or SIGTERM stops both within seconds, serve process first.
#
# The server runs in a session of its own so a terminal's Ctrl-C (SIGINT to the whole process group)
# does not take it down under the serve process, which would then hang on a missing API. This script
# stops them in order: the serve process (SIGINT; SIGKILL after 6 s), then the server.
set -euo pipefail
cd "$(dirname "$0")/.."
HOST=${PREFECT_HOST:-127.0.0.1}
PORT=${PREFECT_PORT:-4200}
PY=${PYTHON:-.venv/bin/python}
export PREFECT_HOME=${PREFECT_HOME:-$PWD/data/prefect}
export PREFECT_API_URL="http://$HOST:$PORT/api"
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
mkdir -p "$PREFECT_HOME"
SERVE=
setsid "$PY" -m prefect server start --host "$HOST" --port "$PORT" > "$PREFECT_HOME/server.log" 2>&1 &
SERVER=$!

gone_within() {  # gone_within PID SECONDS: wait until PID has exited, at most SECONDS
  local i
  for ((i = 0; i < $2 * 5; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.2; done
  return 1
}

stop() {  # stop [SIGNAL THE SERVE PROCESS ALREADY GOT]
  trap - EXIT INT TERM
  if [ -n "$SERVE" ] && kill -0 "$SERVE" 2>/dev/null; then
    # a terminal's Ctrl-C already reached it: give it time to stop on its own first
    [ "${1:-}" = INT ] && gone_within "$SERVE" 3 || kill -INT "$SERVE" 2>/dev/null || true
    gone_within "$SERVE" 5 || kill -KILL "$SERVE" 2>/dev/null || true
  fi
  kill -TERM -- "-$SERVER" 2>/dev/null || true   # the server's whole session
  gone_within "$SERVER" 3 || kill -KILL -- "-$SERVER" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap stop EXIT
trap 'echo "make serve: stopping"; stop INT; exit 130' INT
trap 'echo "make serve: stopping"; stop; exit 143' TERM

if ! "$PY" - "$PREFECT_API_URL/health" <<'EOF'
import sys, time, urllib.request
for _ in range(120):
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        time.sleep(1)
sys.exit(1)
EOF
then
  echo "make serve: the Prefect server did not answer on $PREFECT_API_URL in 120 s (log: $PREFECT_HOME/server.log)" >&2
  exit 2
fi
echo "Prefect UI: http://$HOST:$PORT   (server log: $PREFECT_HOME/server.log)"
echo "In another shell:  export PREFECT_API_URL=$PREFECT_API_URL; .venv/bin/prefect deployment run anonymize/demo"
"$PY" -m anonymask.deploy.serve &
SERVE=$!
wait "$SERVE"
