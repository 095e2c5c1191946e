// Ports for servers that another process binds later (PostgreSQL, redis-server, dovecot, n8n).
//
// A port from listen(0) comes from the kernel's ephemeral range, which outgoing connections draw
// their local ports from too. Between the check here and the child's bind, any connection of any
// test (one more pool connection to PostgreSQL, say) can take that port, and the child fails with
// "Address already in use": a throwaway PostgreSQL did so on port 54364 in a fresh-clone CI run
// (2026-11-28). The kernel never gives an outgoing connection a port below that range, so a port
// picked there and found free stays free until someone binds it on purpose.
const fs = require('fs');
const net = require('net');

const LOWEST = 10000;

/** The first port of the kernel's ephemeral range (Linux's default where it cannot be read). */
function ephemeralStart() {
	try {
		const [low] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
		if (Number.isInteger(low) && low > LOWEST + 2000) return low;
	} catch {
		// not Linux: the default below
	}
	return 32768;
}

/** Whether nothing listens on 127.0.0.1:port now. */
function portFree(port) {
	return new Promise((resolve) => {
		const server = net.createServer();
		server.unref();
		server.once('error', () => resolve(false));
		server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
	});
}

/**
 * A free port below the ephemeral range for a server to bind. `alsoFree` lists offsets whose
 * ports must be free too and stay below the range (a Redis Cluster node's bus port is +10000);
 * `taken` lists ports already handed to servers not yet started (all their ports, offsets included).
 */
async function serverPort({ alsoFree = [], taken = [] } = {}) {
	const highest = ephemeralStart() - 1 - Math.max(0, ...alsoFree);
	for (let attempt = 0; attempt < 200; attempt++) {
		const port = LOWEST + Math.floor(Math.random() * (highest - LOWEST + 1));
		const wanted = [port, ...alsoFree.map((offset) => port + offset)];
		if (wanted.some((p) => taken.includes(p))) continue;
		let free = true;
		for (const p of wanted) free = free && (await portFree(p));
		if (free) return port;
	}
	throw new Error(`no free port between ${LOWEST} and ${highest} after 200 tries`);
}

module.exports = { serverPort };
