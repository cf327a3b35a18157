#!/usr/bin/env bash
# Screenshot a report page with headless Chromium (Debian package `chromium`), then print the page's
# DOM as Chromium rendered it on stdout, so a caller can check the plot titles are there.  The page's
# console messages (JavaScript errors, console.error: "INFO:CONSOLE..." lines of Chromium's log) go
# to stderr, so a caller can check there are none.
#   docs/img/screenshot.sh PAGE.html OUT.png [WIDTH,HEIGHT]
# docs/img/training_page.png was made with:
#   rldata report -o rep --run RUN_A --run RUN_B && docs/img/screenshot.sh rep/training.html docs/img/training_page.png
set -euo pipefail
page=$(realpath "$1"); png=$2; size=${3:-1150,1500}
chrome=${CHROMIUM:-/usr/bin/chromium}
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
       --no-first-run --user-data-dir="$profile" --hide-scrollbars)
"$chrome" "${flags[@]}" --enable-logging=stderr --v=0 --screenshot="$(realpath -m "$png")" \
  --window-size="$size" "file://$page" 2>"$profile/log" >/dev/null
grep -a ':CONSOLE' "$profile/log" >&2 || true
test -s "$png" || { echo "screenshot.sh: chromium wrote no $png" >&2; exit 1; }
"$chrome" "${flags[@]}" --dump-dom "file://$page" 2>/dev/null
