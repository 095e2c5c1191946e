// Drops this run's n8n databases (runDatabases.js), then the shared teardown.
const sharedTeardown = require('../../support/globalTeardown');
const { dropRunDatabases } = require('./n8n');

module.exports = async () => {
	try {
		const dropped = await dropRunDatabases();
		if (dropped > 0) console.log(`[test teardown] dropped ${dropped} n8n database${dropped === 1 ? '' : 's'} of this run`);
	} finally {
		await sharedTeardown();
	}
};
