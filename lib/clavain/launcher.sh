# shellcheck shell=bash
# shellcheck disable=SC2034  # CLAVAIN_PY is read by the scripts that source this file
# Sourced by bin/clavain and bin/clavain-hook: sets CLAVAIN_ROOT (the plugin folder) and
# CLAVAIN_PY (the interpreter). Order: an explicit CLAVAIN_PYTHON; the plugin venv once its
# bootstrap marked it ready; else python3 from PATH. No subshells: this runs on every tool call.
if [ -n "${CLAVAIN_PYTHON:-}" ] && [ -x "$CLAVAIN_PYTHON" ]; then
  CLAVAIN_PY=$CLAVAIN_PYTHON
elif [ -n "${CLAUDE_PLUGIN_DATA:-}" ] && [ -f "$CLAUDE_PLUGIN_DATA/venv/.clavain-ready" ] \
    && [ -x "$CLAUDE_PLUGIN_DATA/venv/bin/python" ]; then
  CLAVAIN_PY=$CLAUDE_PLUGIN_DATA/venv/bin/python
else
  CLAVAIN_PY=python3
fi
export PYTHONPATH="$CLAVAIN_ROOT/lib${PYTHONPATH:+:$PYTHONPATH}"
