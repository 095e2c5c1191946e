// A throwaway PgBouncer in transaction mode in front of the suite's PostgreSQL, for the tests that
// run the ledger as it runs behind one (docs/credentials.md promises it): between two transactions
// a client's server connection goes to another client, so a statement that leaves state in the
// session (a named prepared statement, a SET) breaks. Its pool is smaller than the tests'
// concurrency, so connections really do change hands. Debian's pgbouncer package; .ci/run
// installs it. Started once per run by globalSetup, which sets PGBOUNCER_URL.
const { execFileSync, spawnSync } = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');

const { serverPort } = require('./ports');

/** Server connections per database and user: fewer than the tests run side by side. */
const POOL_SIZE = 2;

const binary = () => ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => fs.existsSync(p)) ?? (spawnSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' }).stdout.trim() || null);

function answers(port) {
	return new Promise((resolve) => {
		const socket = net.connect(port, '127.0.0.1');
		socket.once('connect', () => (socket.destroy(), resolve(true)));
		socket.once('error', () => resolve(false));
	});
}

/**
 * Starts PgBouncer on a free port for the database of `databaseUrl`; resolves to
 * `{ url, stop }`, or `{ missing }` when pgbouncer is not installed. As root it runs as the
 * `postgres` user (PgBouncer refuses to run as root).
 */
async function startPgBouncer(databaseUrl) {
	const exe = binary();
	if (!exe) return { missing: 'pgbouncer is not installed (Debian: apt-get install pgbouncer)' };
	const target = new URL(databaseUrl);
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-pgbouncer-'));
	const port = await serverPort();
	const user = decodeURIComponent(target.username) || 'postgres';
	const password = decodeURIComponent(target.password);
	fs.writeFileSync(path.join(dir, 'userlist.txt'), `"${user}" "${password}"\n`);
	fs.writeFileSync(
		path.join(dir, 'pgbouncer.ini'),
		[
			'[databases]',
			`* = host=${target.hostname} port=${target.port || 5432}${password ? ` password=${password}` : ''}`,
			'[pgbouncer]',
			'listen_addr = 127.0.0.1',
			`listen_port = ${port}`,
			'unix_socket_dir =',
			'auth_type = trust',
			`auth_file = ${path.join(dir, 'userlist.txt')}`,
			'pool_mode = transaction',
			`default_pool_size = ${POOL_SIZE}`,
			'max_client_conn = 500',
			'ignore_startup_parameters = extra_float_digits,options',
			`logfile = ${path.join(dir, 'pgbouncer.log')}`,
			`pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
		].join('\n') + '\n',
	);
	const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
	if (asRoot) execFileSync('chown', ['-R', 'postgres', dir]);
	execFileSync(exe, ['-d', ...(asRoot ? ['-u', 'postgres'] : []), path.join(dir, 'pgbouncer.ini')]);
	for (let i = 0; i < 100 && !(await answers(port)); i++) await new Promise((r) => setTimeout(r, 50));
	if (!(await answers(port))) {
		const log = fs.existsSync(path.join(dir, 'pgbouncer.log')) ? fs.readFileSync(path.join(dir, 'pgbouncer.log'), 'utf8').slice(-2000) : '(no log)';
		throw new Error(`PgBouncer did not answer on port ${port}:\n${log}`);
	}
	const url = new URL(databaseUrl);
	url.hostname = '127.0.0.1';
	url.port = String(port);
	return {
		url: url.toString(),
		poolSize: POOL_SIZE,
		stop() {
			try {
				const pid = Number(fs.readFileSync(path.join(dir, 'pgbouncer.pid'), 'utf8'));
				if (pid > 0) process.kill(pid, 'SIGTERM');
			} catch {
				// already gone
			}
			fs.rmSync(dir, { recursive: true, force: true });
		},
	};
}

module.exports = { startPgBouncer, POOL_SIZE };
