import { backends, describeRetention } from './retention.suite';

for (const [name, make, describeBackend] of backends) describeRetention(name, make, describeBackend);
