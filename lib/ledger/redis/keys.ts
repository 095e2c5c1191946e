import { LedgerInputError } from '../errors';
import { STATUSES } from '../types';

/**
 * Key layout. Every key of one namespace carries the hash tag `{prefix:namespace}`, so a script
 * that touches many rows of one namespace stays on one cluster slot:
 *
 *   {p:ns}:r:<key>:<step>     string, one row as JSON, expires natively at its expires_at (a row
 *                             in a marked phase, e.g. `sending`, at 9999-12-31: kept until resolved)
 *   {p:ns}:k:<key>            set of the row members of one key (for get and release)
 *   {p:ns}:idx                sorted set, member -> updated_at (list order, paging)
 *   {p:ns}:st:<status>        sorted set per status, member -> expires_at (counts, purge)
 *   {p:ns}:lease              sorted set of in_progress rows, member -> lease_expires_at (stuck)
 *   {p:ns}:ipfs               sorted set of in_progress rows, member -> first_seen_at (oldest)
 *   {p:ns}:meta               hash, `blocked` = duplicates blocked, `fence` = last fencing token
 *                             handed out (never deleted, so tokens only grow)
 *   {p:ns}:cp:<name>          hash, one checkpoint
 *   {p:ns}:audit              stream of releases and "sent" resolutions (who, when, what the row was)
 *   {p:ns}:d:<YYYY-MM-DD>     hash, counter -> amount of one UTC day (by the server's clock);
 *                             expires COUNTS_KEPT_DAYS days after that day
 *   {p}:namespaces            sorted set (all scores 0) of namespaces that hold rows
 *   {p}:version               layout version
 *
 * A row's "member" is `<key>:<step>` with `%`, `:`, `{` and `}` percent-escaped, so that no
 * namespace, key or step can break out of its place in a key name or the hash tag.
 */

export const LAYOUT_VERSION = 1;

const PREFIX = /^[A-Za-z0-9_.-]{1,64}$/;

export function assertPrefix(value: unknown): string {
	if (typeof value !== 'string' || !PREFIX.test(value)) {
		throw new LedgerInputError(
			`The key prefix ${JSON.stringify(value)} is not valid`,
			'Use 1 to 64 letters, digits, dots, dashes or underscores, for example "idem".',
		);
	}
	return value;
}

export const esc = (s: string) => s.replace(/[%:{}]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

export const member = (key: string, step: string) => `${esc(key)}:${esc(step)}`;

/** The keys of one namespace. The first eight are passed, in this order, to every row script. */
export function namespaceKeys(prefix: string, namespace: string) {
	const base = `{${prefix}:${esc(namespace)}}:`;
	return {
		base,
		fixed: [
			`${base}idx`,
			`${base}meta`,
			`${base}lease`,
			`${base}ipfs`,
			...STATUSES.map((s) => `${base}st:${s}`),
		],
		row: (m: string) => `${base}r:${m}`,
		steps: (key: string) => `${base}k:${esc(key)}`,
		checkpoint: (name: string) => `${base}cp:${esc(name)}`,
		audit: `${base}audit`,
		/** The start of the day keys; the scripts append the date, which only the server's clock decides. */
		days: `${base}d:`,
	};
}

export type NamespaceKeys = ReturnType<typeof namespaceKeys>;

export const registryKey = (prefix: string) => `{${prefix}}:namespaces`;
export const versionKey = (prefix: string) => `{${prefix}}:version`;
