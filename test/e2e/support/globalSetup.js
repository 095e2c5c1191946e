// The shared setup (a real PostgreSQL, a Redis Cluster), and a tag for this run's n8n databases
// (runDatabases.js).
const sharedSetup = require('../../support/globalSetup');
const { tagRun } = require('./runDatabases');

module.exports = async () => {
	tagRun();
	await sharedSetup();
};
