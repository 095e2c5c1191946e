/**
 * The n8n databases of one real-n8n run are dropped when the run ends, not as each n8n stops.
 * PostgreSQL's DROP DATABASE forces an immediate checkpoint: every dirty page of the server
 * written and fsynced at once. On a slow disk that stalled commits for seconds (a checkpoint's
 * sync phase of 4.6 s seen in CI) while another file's storm was running; n8n's own database
 * ping, which must get one of its two pool connections within 5 s, then timed out, and n8n
 * answered webhooks with 503 "Database is not ready!".
 *
 * globalSetup tags the run (N8N_E2E_RUN, inherited by jest's workers); test/e2e/support/n8n.ts
 * names each database it creates after the tag and leaves it in place when n8n stops; the
 * run's globalTeardown drops the databases of that tag (n8n.ts dropRunDatabases). Outside a
 * tagged run (a script that starts n8n itself) each database is dropped as its n8n stops.
 */
const { randomBytes } = require('node:crypto');

const RUN_ENV = 'N8N_E2E_RUN';

/** The prefix of this run's n8n database names, or '' outside a tagged run. */
const runPrefix = () => (process.env[RUN_ENV] ? `n8n_e2e_${process.env[RUN_ENV]}_` : '');

function tagRun() {
	process.env[RUN_ENV] = randomBytes(4).toString('hex');
}

module.exports = { runPrefix, tagRun };
