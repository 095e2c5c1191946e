/** Render Dashboard through the real engine on PostgreSQL and Redis (the suite: dashboardFlow.ts). */
import { closeAllPostgresLedgers, closeAllRedisLedgers } from '../../lib/ledger';
import { postgresBackend, redisBackend } from '../support/engineBackends';
import { describeDashboard } from './dashboardFlow';

describeDashboard({ ...postgresBackend, backend: 'postgres' }, closeAllPostgresLedgers);
describeDashboard({ ...redisBackend('dash'), backend: 'redis' }, closeAllRedisLedgers);
