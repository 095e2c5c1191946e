// The Prompt Cache refuses a Redis that can lose keys (no persistence, eviction) unless the
// credential accepts it, and then checks the server again on every run (lib/n8n/redisSafety.ts):
// a latency measured there would include that check, which a Redis set up for the ledger never
// pays. When the bench's Redis is such a server (a dev or CI box often runs one without AOF), the
// Prompt Cache part runs against a throwaway redis-server with AOF on and no eviction instead, and
// says so.
const { execFileSync, spawnSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { checkRedisSafety } = require('../dist/lib/ledger/redis');
const { serverPort } = require('../test/support/ports');

/** { url, note, stop } of a Redis the Prompt Cache accepts: `url` itself when it is one. */
async function safeRedisFor(client, url, part = 'the Prompt Cache part') {
	const report = await checkRedisSafety(client);
	if (report.risks.length === 0) return { url, note: null, stop: () => undefined };
	if (spawnSync('sh', ['-c', 'command -v redis-server']).status !== 0) return null;
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-bench-redis-'));
	const port = await serverPort();
	execFileSync('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--daemonize', 'yes', '--dir', dir, '--logfile', path.join(dir, 'redis.log'), '--appendonly', 'yes', '--maxmemory-policy', 'noeviction']);
	const cli = (...args) => spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout.trim();
	for (let i = 0; i < 100 && cli('PING') !== 'PONG'; i++) await new Promise((r) => setTimeout(r, 100));
	return {
		url: `redis://127.0.0.1:${port}`,
		note: `${url} can lose keys (${report.risks.map((r) => r.found).join('; ')}), so ${part} ran on a throwaway redis-server ${port} with AOF on and no eviction`,
		stop: () => {
			cli('SHUTDOWN', 'NOSAVE');
			fs.rmSync(dir, { recursive: true, force: true });
		},
	};
}

module.exports = { safeRedisFor };
