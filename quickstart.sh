#!/bin/sh
# crustacean's quickstart: make a sample workspace, show what the 4C pipeline would do with it
# (or run it, when a model is configured), then read memory the way an agent does.
#
#   sh quickstart.sh [FOLDER]     (default: crustacean-sample; it must not exist yet)
#
# With ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL) set, each stage runs once for real; without,
# nothing calls a model and `tick --plan` shows what each stage would send and cost.
set -eu
DIR="${1:-crustacean-sample}"

step() { printf '\n==> %s\n' "$*"; }

if [ -e "$DIR" ]; then
    echo "Error: $DIR already exists; remove it, or give another folder: sh quickstart.sh OTHER" >&2
    exit 2
fi

step "init --sample: a workspace with a few weeks of made-up memory, and two days of OpenClaw and Claude Code transcripts as its collect sources."
crustacean init --sample "$DIR"
cd "$DIR"

if [ -n "${ANTHROPIC_API_KEY:-}${ANTHROPIC_BASE_URL:-}" ]; then
    step "collect (small model): read the transcripts' new lines, append what happened to the daily logs."
    crustacean collect
    step "curate (mid model): route recent daily entries into contacts, lessons, reminders and knowledge."
    crustacean curate
    step "compile (large model): archive old logs, apply tiers, keep MEMORY.md under its caps, write the weekly digest."
    crustacean compile
    step "calibrate (large model): the monthly audit; changes to foundation files wait as proposals."
    crustacean calibrate
    step "review: proposals the pipeline made for you to approve or reject."
    crustacean review
else
    step "tick --plan: no API key, so no model call; what each stage would do now, and its estimated cost."
    crustacean tick --plan
fi

step "status: each stage's last run and next slot, the files, MEMORY.md against its caps."
crustacean status
step "search: full-text search over the workspace, the tool an agent uses mid-conversation."
crustacean search test database
step "context --for main: what an agent should load at the start of a main session, within its caps (the first lines)."
CONTEXT=$(crustacean context --for main)
printf '%s\n' "$CONTEXT" | head -n 20
TOTAL=$(printf '%s\n' "$CONTEXT" | wc -l)
if [ "$TOTAL" -gt 20 ]; then
    echo "[... $((TOTAL - 20)) more lines: crustacean context --for main]"
fi

# The commands below must work in the user's own shell, which may not have this script's PATH
# (e.g. a venv's bin folder put on it just for this run): name the program by its full path.
BIN=$(command -v crustacean)
case "$BIN" in /*) ;; *) BIN=crustacean ;; esac
HERE=$(pwd)
step "Done. The sample is in $HERE. Next, in your shell:"
echo "  cd '$HERE'"
for next in "history" "search waitlist demo" "context --for main" "help"; do
    echo "  '$BIN' $next"
done
if [ "$BIN" != crustacean ]; then
    echo "Put $(dirname "$BIN") on your PATH to type just 'crustacean' (pipx install . does it for good)."
fi
echo "Set ANTHROPIC_API_KEY and run this again with another folder to see the stages run."
