import { freshPostgresLedger } from '../support/db';
import { describeIfRedis, freshRedisClusterLedger, freshRedisLedger, redisClusterReachable } from '../support/redis';
import { peekSuite } from './ledger.peek.suite';

describe('Ledger.peek on PostgreSQL', () => peekSuite(() => freshPostgresLedger()));
describeIfRedis('Ledger.peek on Redis')('Ledger.peek on Redis', () => peekSuite(() => freshRedisLedger()));
describeIfRedis('Ledger.peek on Redis Cluster', redisClusterReachable)('Ledger.peek on Redis Cluster', () => peekSuite(() => freshRedisClusterLedger()));
