# shellcheck shell=bash
# shellcheck disable=SC2034  # CLAVAIN_PY is read by the scripts that source this file
# Sourced by bin/clavain and bin/clavain-hook: sets CLAVAIN_ROOT (the plugin folder) and
# CLAVAIN_PY (the interpreter). Order: an explicit CLAVAIN_PYTHON; the plugin venv once its
# bootstrap marked it ready (CLAUDE_PLUGIN_DATA in hooks, CLAVAIN_PLUGIN_DATA in Bash calls);
# else python3 from PATH. No subshells: this runs on every tool call.
if [ -n "${CLAVAIN_PYTHON:-}" ] && [ -x "$CLAVAIN_PYTHON" ]; then
  CLAVAIN_PY=$CLAVAIN_PYTHON
elif CLAVAIN_DATA=${CLAUDE_PLUGIN_DATA:-${CLAVAIN_PLUGIN_DATA:-}}; [ -n "$CLAVAIN_DATA" ] \
    && [ -f "$CLAVAIN_DATA/venv/.clavain-ready" ] && [ -x "$CLAVAIN_DATA/venv/bin/python" ]; then
  CLAVAIN_PY=$CLAVAIN_DATA/venv/bin/python
else
  CLAVAIN_PY=python3
fi
export PYTHONPATH="$CLAVAIN_ROOT/lib${PYTHONPATH:+:$PYTHONPATH}"
export CLAVAIN_ROOT
