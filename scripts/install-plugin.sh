#!/usr/bin/env bash
# Install Clavain into Claude Code from this clone, without the developer's .venv/, build/ or
# caches: Claude Code copies a path-sourced plugin folder whole (.gitignore is not read), so the
# plugin is installed from an export of what git tracks (and untracked files it does not
# ignore), not from the working folder itself.
#   scripts/install-plugin.sh            (CLAVAIN_CLAUDE_BIN picks the claude binary)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
claude=${CLAVAIN_CLAUDE_BIN:-claude}
dest=${CLAVAIN_PLUGIN_EXPORT:-${XDG_DATA_HOME:-$HOME/.local/share}/clavain/plugin}
# Checked before anything is exported: without Claude Code there is nothing to install into.
if ! command -v -- "$claude" >/dev/null 2>&1; then
  echo "install-plugin: no claude binary ($claude not found): install Claude Code" \
    "(npm install -g @anthropic-ai/claude-code) or set CLAVAIN_CLAUDE_BIN to it" >&2
  exit 1
fi

staging=$(mktemp -d "${TMPDIR:-/tmp}/clavain-export.XXXXXX")
trap 'rm -rf "$staging"' EXIT
(cd "$repo" && git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' path; do
      [ -e "$path" ] || [ -L "$path" ] || continue  # deleted but not yet committed
      mkdir -p -- "$staging/$(dirname -- "$path")"
      cp -P -p -- "$path" "$staging/$path"  # a symlink stays a symlink
    done)
if [ -e "$dest" ] && [ ! -d "$dest/.claude-plugin" ]; then
  echo "install-plugin: $dest exists and is not an earlier export; refusing to replace it" >&2
  exit 2
fi
mkdir -p "$(dirname "$dest")"
rm -rf "$dest"
chmod 755 "$staging"
mv "$staging" "$dest"
trap - EXIT
echo "exported $(find "$dest" -type f | wc -l) files to $dest"

if ! "$claude" plugin marketplace add "$dest"; then
  "$claude" plugin marketplace update clavain
fi
"$claude" plugin install clavain@clavain
