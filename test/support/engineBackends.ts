import type { ICredentialDataDecryptedObject } from 'n8n-workflow';

import type { Ledger } from '../../lib/ledger';
import { freshPostgresLedger, settingsFromUrl } from './db';
import { freshRedisLedger, suiteRedisCredential, uniquePrefix } from './redis';

/** A fresh ledger for an engine test, with the node credentials that reach it. */
export interface EngineBackend {
	name: string;
	/** The value of our nodes' "Ledger" parameter. */
	parameter: 'postgres' | 'redis';
	open(): Promise<{ ledger: Ledger; credentials: Record<string, ICredentialDataDecryptedObject>; dispose(): Promise<void> }>;
}

/** A new ledger table on the suite's PostgreSQL. */
export const postgresBackend: EngineBackend = {
	name: 'PostgreSQL',
	parameter: 'postgres',
	async open() {
		const fx = await freshPostgresLedger();
		return { ledger: fx.ledger, credentials: { idempotencyPostgresApi: settingsFromUrl(fx.table) }, dispose: () => fx.dispose() };
	},
};

/** A new key prefix (starting with `prefixStem`) on the suite's Redis. */
export const redisBackend = (prefixStem: string): EngineBackend => ({
	name: 'Redis',
	parameter: 'redis',
	async open() {
		const fx = await freshRedisLedger(uniquePrefix(prefixStem));
		return { ledger: fx.ledger, credentials: { idempotencyRedisApi: suiteRedisCredential(fx.prefix) }, dispose: () => fx.dispose() };
	},
});
