#!/usr/bin/env bash
# Warns about each benchmark sitting (bench/results/<sitting>/) whose files in the repository
# add up to more than SITTING_MAX_BYTES (5 MB): a sitting keeps what a reader needs (results.md,
# notes, summaries, compact charts), and raw histogram logs gzipped (bench/compare.py does it)
# or left out. A warning, not a failure: the test command goes on.
set -euo pipefail
cd "$(dirname "$0")/.."
max=${SITTING_MAX_BYTES:-5000000}
git ls-files -z bench/results 2>/dev/null | xargs -0 -r du -b --apparent-size 2>/dev/null |
  awk -v max="$max" '{ split($2, p, "/"); size[p[3]] += $1 }
    END { for (s in size) if (size[s] > max)
      printf "warning: bench/results/%s holds %.1f MB in the repository (more than %.1f MB): keep results.md, notes, summaries and compact charts, leave raw histogram logs out (.gitignore does for new runs)\n", s, size[s] / 1e6, max / 1e6 }' |
  sort
