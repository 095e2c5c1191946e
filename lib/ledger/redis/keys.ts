import { LedgerInputError } from '../errors';
import { STATUSES } from '../types';

/**
 * Key layout. Every key of one namespace carries the hash tag `{prefix:namespace}`, so a script
 * that touches many rows of one namespace stays on one cluster slot:
 *
 *   {p:ns}:r:<key>:<step>     string, one row as JSON, expires natively at its expires_at (a row
 *                             in a marked phase, e.g. `sending`, at 9999-12-31: kept until resolved)
 *   {p:ns}:members            sorted set (all scores 0, so in byte order) of the row members;
 *                             the steps of one key are the range `<key>:` to `<key>;` (get, release)
 *   {p:ns}:k:<key>            layout 1 only: set of the row members of one key, expiring with its
 *                             longest-lived row. Layouts 2 and 3 write none; get and release still read
 *                             those a layout 1 writer left, until they expire.
 *   {p:ns}:idx                sorted set, member -> updated_at (list order, paging)
 *   {p:ns}:st:<status>        sorted set per status, member -> expires_at (counts, purge)
 *   {p:ns}:unindexed          layout 3: list of the claim calls whose new rows are not yet in
 *                             idx and st, one JSON entry per call (its rows' members, the tail of
 *                             their text, status, updated_at, expires_at); written into idx and st
 *                             before anything reads those (RedisLedger.indexPending)
 *   {p:ns}:lease, {p:ns}:ipfs layout 1 only: in_progress rows by lease expiry and by first seen.
 *                             Layouts 2 and 3 write neither (stats read the in_progress rows instead);
 *                             entries a layout 1 writer left are removed with their row's others.
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

/**
 * 2: the steps of a key are found in `{p:ns}:members`, one sorted set per namespace written in
 * bulk by each script call, instead of a set per key written row by row (three commands and a key
 * per row); and a claim in lease mode writes two index entries per row, as one in mark-seen mode
 * does (updated_at, and its status by expiry), not four: layout 1's lease and first-seen indexes
 * are no longer written, and stats find stuck leases and the oldest in-progress row by reading
 * the in-progress rows. Rows themselves are stored as in layout 1; layout 1 data is read as it
 * is, and a ledger of layout 2 or later marks the prefix with its layout (see
 * RedisLedger.checkLayout), after which a version that knows only an older one refuses it.
 *
 * 3: a claim writes no index entries for the rows it creates: it notes the call once in
 * `{p:ns}:unindexed`, and the entries are written from there before the indexes are read (lists,
 * stats, purge, export), each only while the row is still as that claim wrote it (a row written
 * since indexed itself). Two sorted-set insertions per new row were a third of a claim's time in
 * Redis (docs/benchmarks.md). Rows are stored as in layout 2; a version that knows only layout 2
 * would not see unindexed rows in its lists and stats, so it refuses a prefix marked 3.
 */
export const LAYOUT_VERSION = 3;

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

const ESCAPED = /[%:{}]/;
export const esc = (s: string) =>
	ESCAPED.test(s) ? s.replace(/[%:{}]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`) : s;

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
		/** Layout 1's set of the members of one key; its name also carries the key to the scripts. */
		steps: (key: string) => `${base}k:${esc(key)}`,
		members: `${base}members`,
		unindexed: `${base}unindexed`,
		checkpoint: (name: string) => `${base}cp:${esc(name)}`,
		audit: `${base}audit`,
		/** The start of the day keys; the scripts append the date, which only the server's clock decides. */
		days: `${base}d:`,
	};
}

export type NamespaceKeys = ReturnType<typeof namespaceKeys>;

export const registryKey = (prefix: string) => `{${prefix}}:namespaces`;
export const versionKey = (prefix: string) => `{${prefix}}:version`;
