#!/usr/bin/env bash
# Checks the alerting rules that ship beside the Grafana dashboard
# (examples/metrics/alerts.yml) with promtool: their syntax, then their unit
# tests (examples/metrics/alerts_test.yml). Installs Debian's prometheus
# package, which provides promtool, if it is missing.
#
# Usage: scripts/check-rules.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/prometheus-tools.sh

promtool --version 2>&1 | head -n1
promtool check rules examples/metrics/alerts.yml
(cd examples/metrics && promtool test rules alerts_test.yml)
