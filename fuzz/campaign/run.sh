#!/usr/bin/env bash
# The hostile-input campaign of docs/hostile-input.md (by hand, not in CI):
#
#   fuzz/campaign/run.sh [--build DIR] [--out DIR] [--only TOOL,...]
#                        [--san-run PATH] [--timeout S] [--list]
#
# Builds nothing: run scripts/test (or ninja -C build) first. Writes
# OUT/results.tsv, OUT/summary.md and OUT/inputs/ (default OUT:
# BUILD/campaign) and exits 1 if any case crashed, hung, answered silently
# wrong or blamed itself for a bad input. See campaign.py for the cases.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec nice -n 10 python3 "$here/campaign.py" "$@"
