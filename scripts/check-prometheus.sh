#!/usr/bin/env bash
# End-to-end check of the metrics against a real Prometheus (Debian's
# prometheus package, installed if missing): examples/metrics runs with a
# stuck key, Prometheus scrapes it and evaluates examples/metrics/alerts.yml
# every second; after 30 s every expression of the Grafana dashboard must
# parse and return data through the HTTP API, PerkeyKeyStuck must fire for
# the stuck key and resolve once it is given back while the hot key stays at
# its cap. Takes about a minute (TestPrometheus in examples/metrics says
# exactly what it checks).
#
# Usage: scripts/check-prometheus.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/prometheus-tools.sh

prometheus --version 2>&1 | head -n1
PERKEY_E2E_PROMETHEUS=1 timeout 150 go test -count=1 -run '^TestPrometheus$' -v ./examples/metrics
