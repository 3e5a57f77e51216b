#!/usr/bin/env bash
# Screenshots of a dpstream report in headless Chromium (Debian package `chromium`).
# Usage: scripts/screenshot_report.sh REPORT_DIR [OUT_DIR]
# Writes one PNG per section (the page scrolled to each anchor) into OUT_DIR (docs/screenshots).
set -euo pipefail
report="$(cd "$1" && pwd)"
out="${2:-$(dirname "$0")/../docs/screenshots}"
mkdir -p "$out"
shoot() {  # anchor, file, height
  chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size=1280,"$3" --screenshot="$out/$2" "file://$report/index.html$1" >/dev/null 2>&1
  echo "wrote $out/$2"
}
shoot "" report_1_answers.png 1400
shoot "#pak" report_2_parameters.png 2600
shoot "#optstream" report_3_hierarchy.png 3000
shoot "#tops" report_4_range_queries.png 1500
shoot "#forecast" report_5_forecasts.png 1900
