/**
 * docker/docker-compose.yml is a valid Compose file (the Compose Specification's JSON schema,
 * vendored in test/unit/fixtures/compose-spec/) and holds together with the rest: the hosts the
 * ledger credentials' hints name are its services, n8n runs in queue mode on them, both n8n
 * services are built from docker/Dockerfile at the newest matrix version, and docs/docker.md shows
 * that Dockerfile as it is. (test/e2e/dockerLayout.e2e.test.ts runs the Dockerfile's steps.)
 */
import { readFileSync } from 'fs';
import path from 'path';

import Ajv2019 from 'ajv/dist/2019';
import { parse } from 'yaml';

import { IdempotencyPostgresApi } from '../../credentials/IdempotencyPostgresApi.credentials';
import { IdempotencyRedisApi } from '../../credentials/IdempotencyRedisApi.credentials';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { NEWEST } = require('../e2e/support/matrix.js') as { NEWEST: string };

const root = path.join(__dirname, '../..');
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');

interface Service {
	build?: { context: string; args?: Record<string, string> };
	image?: string;
	command?: string | string[];
	environment?: Record<string, string | number>;
	volumes?: string[];
	depends_on?: Record<string, { condition: string }>;
}
interface Compose {
	services: Record<string, Service>;
	volumes?: Record<string, unknown>;
}

/** The Compose file as Docker Compose reads it: YAML merge keys (<<) applied. */
const compose = parse(read('docker/docker-compose.yml'), { merge: true }) as Compose;

/** A validator for the vendored Compose Specification schema. */
function composeValidator() {
	// The schema declares draft 2019-09 under its old http URL, and uses draft-04's `id` for
	// anchors; Ajv's 2019-09 dialect takes it as it is once `id` is an annotation.
	const { $schema: _dialect, ...schema } = JSON.parse(read('test/unit/fixtures/compose-spec/compose-spec.json'));
	const ajv = new Ajv2019({ allErrors: true, strict: false });
	ajv.removeKeyword('id');
	ajv.addKeyword('id');
	// The schema's own formats, as Compose reads them.
	ajv.addFormat('duration', /^[-+]?(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/);
	ajv.addFormat('ports', /^((\d{1,3}\.){3}\d{1,3}:|\[[0-9a-fA-F:]+\]:)?((\d+(-\d+)?)?:)?\d+(-\d+)?(\/(tcp|udp|sctp))?$/);
	ajv.addFormat('expose', /^\d+(-\d+)?(\/(tcp|udp|sctp))?$/);
	ajv.addFormat('subnet_ip_address', /^[0-9a-fA-F.:]+\/\d{1,3}$/);
	return ajv.compile(schema);
}

describe('docker/docker-compose.yml', () => {
	const validate = composeValidator();

	test('is valid against the Compose Specification schema', () => {
		const valid = validate(compose);
		expect(validate.errors ?? []).toEqual([]);
		expect(valid).toBe(true);
	});

	test('the schema check is live: it refuses a misspelt key and a bad port', () => {
		expect(validate({ services: { n8n: { image: 'n8nio/n8n', portz: ['5678:5678'] } } })).toBe(false);
		expect(validate({ services: { n8n: { image: 'n8nio/n8n', ports: ['56x8:5678'] } } })).toBe(false);
		expect(validate({ services: { n8n: { image: 'n8nio/n8n', healthcheck: { interval: 'often' } } } })).toBe(false);
	});

	test('n8n in queue mode: a main instance and one worker, both built from docker/Dockerfile, on PostgreSQL and Redis', () => {
		expect(Object.keys(compose.services).sort()).toEqual(['n8n', 'n8n-worker', 'postgres', 'redis']);
		const { n8n, 'n8n-worker': worker } = compose.services;
		expect(worker.command).toBe('worker');
		expect(n8n.command).toBeUndefined();
		for (const service of [n8n, worker]) {
			expect(service.build?.context).toBe('.'); // docker/, where the Dockerfile and the .tgz are
			expect(service.build?.args?.N8N_VERSION).toBe(`\${N8N_VERSION:-${NEWEST}}`);
			expect(service.environment).toMatchObject({
				EXECUTIONS_MODE: 'queue',
				DB_TYPE: 'postgresdb',
				DB_POSTGRESDB_HOST: 'postgres',
				QUEUE_BULL_REDIS_HOST: 'redis',
			});
			expect(String(service.environment?.N8N_ENCRYPTION_KEY)).toMatch(/^\$\{N8N_ENCRYPTION_KEY:\?/);
			expect(service.volumes).toContain('n8n_data:/home/node/.n8n');
			expect(service.depends_on?.postgres?.condition).toBe('service_healthy');
			expect(service.depends_on?.redis?.condition).toBe('service_healthy');
		}
		const postgres = compose.services.postgres.environment!;
		expect([n8n.environment?.DB_POSTGRESDB_DATABASE, n8n.environment?.DB_POSTGRESDB_USER]).toEqual([postgres.POSTGRES_DB, postgres.POSTGRES_USER]);
		// A Redis the Redis ledger accepts (docs/credentials.md): persistence on, no eviction.
		expect(compose.services.redis.command).toEqual(expect.arrayContaining(['--appendonly', 'yes', '--maxmemory-policy', 'noeviction']));
		expect(read('docker/.env.example')).toMatch(new RegExp(`^N8N_VERSION=${NEWEST.replace(/\./g, '\\.')}$`, 'm'));
	});

	test.each([
		['PostgreSQL', new IdempotencyPostgresApi(), 'postgres'],
		['Redis', new IdempotencyRedisApi(), 'redis'],
	] as const)('the %s credential\'s Host hint says what to enter in Docker, and names the compose service', (_name, credential, service) => {
		const host = credential.properties.find((p) => p.name === 'host')!;
		expect(host.default).toBe('localhost');
		expect(host.hint).toContain('Docker');
		expect(host.hint).toContain('localhost is the n8n container itself');
		expect(host.hint).toContain(`${service} in docker/docker-compose.yml`);
		expect(compose.services[service]).toBeDefined();
	});

	test('docs/docker.md shows docker/Dockerfile as it is, and the ledger credential the compose file implies', () => {
		const doc = read('docs/docker.md');
		const block = /```dockerfile\n([\s\S]*?)```/.exec(doc)?.[1];
		const steps = (text: string) =>
			text
				.split('\n')
				.map((l) => l.trim())
				.filter((l) => l && !l.startsWith('#'));
		expect(steps(block ?? '')).toEqual(steps(read('docker/Dockerfile')));
		const postgres = compose.services.postgres.environment!;
		expect(doc).toContain('| Host | `postgres` |');
		expect(doc).toContain(`| Database | \`${postgres.POSTGRES_DB}\` |`);
		expect(doc).toContain(`| User | \`${postgres.POSTGRES_USER}\` |`);
	});

	test('the secrets it refuses to start without are blank in docker/.env.example, so a copy of it does not start until both are set', () => {
		const guarded = [...read('docker/docker-compose.yml').matchAll(/\$\{([A-Z0-9_]+):\?[^}]*\}/g)].map((m) => m[1]);
		expect([...new Set(guarded)].sort()).toEqual(['N8N_ENCRYPTION_KEY', 'POSTGRES_PASSWORD']);
		const example = new Map(
			read('docker/.env.example')
				.split('\n')
				.filter((line) => /^[A-Z0-9_]+=/.test(line))
				.map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1).trim()] as const),
		);
		// Compose's ${VAR:?message} refuses a variable that is unset or empty.
		for (const name of guarded) expect([name, example.get(name)]).toEqual([name, '']);
	});
});
