/**
 * slack.com on this machine, for n8n's own Slack node, whose API URL is fixed
 * (https://slack.com/api): a throwaway CA and a slack.com certificate made with openssl, an HTTPS
 * server with that certificate that hands every decrypted request to a local Slack stand-in
 * (destinations.ts slackServer), and an HTTP proxy that tunnels `CONNECT slack.com:443` to it and
 * refuses every other host. Start n8n with `env`: n8n 2.x sends its outbound HTTPS through
 * HTTPS_PROXY (NO_PROXY keeps local traffic direct) and trusts NODE_EXTRA_CA_CERTS.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';

export interface SlackDotCom {
	/** Environment for the n8n process. */
	env: Record<string, string>;
	/** Hosts n8n asked the proxy to reach, in order (slack.com:443, or a refused one). */
	connects: string[];
	close(): Promise<void>;
}

function certificates(dir: string): { key: Buffer; cert: Buffer; ca: string } {
	const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
	ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=n8n-nodes-idempotency e2e CA',
		'-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
	ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'slack.key', '-out', 'slack.csr', '-subj', '/CN=slack.com');
	writeFileSync(path.join(dir, 'ext.cnf'), 'subjectAltName=DNS:slack.com\nextendedKeyUsage=serverAuth\n');
	ssl('x509', '-req', '-in', 'slack.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'slack.crt', '-days', '2', '-extfile', 'ext.cnf');
	return { key: readFileSync(path.join(dir, 'slack.key')), cert: readFileSync(path.join(dir, 'slack.crt')), ca: path.join(dir, 'ca.crt') };
}

const listen = (server: net.Server) =>
	new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));

export async function slackDotCom(upstreamUrl: string): Promise<SlackDotCom> {
	const upstream = new URL(upstreamUrl);
	const dir = mkdtempSync(path.join(os.tmpdir(), 'slack-dot-com-'));
	const { key, cert, ca } = certificates(dir);
	const sockets = new Set<net.Socket>();
	const track = (s: net.Socket) => {
		sockets.add(s);
		s.on('close', () => sockets.delete(s));
		s.on('error', () => s.destroy());
		return s;
	};
	const https = tls.createServer({ key, cert }, (socket) => {
		const to = track(net.connect(Number(upstream.port), upstream.hostname));
		track(socket).pipe(to).pipe(socket);
	});
	const httpsPort = await listen(https);
	const connects: string[] = [];
	const proxy = http.createServer((_req, res) => res.writeHead(405).end());
	proxy.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
		track(client);
		connects.push(String(req.url));
		if (req.url !== 'slack.com:443') return void client.end('HTTP/1.1 403 Forbidden\r\n\r\n');
		const to = track(net.connect(httpsPort, '127.0.0.1', () => {
			client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
			if (head.length > 0) to.write(head);
			client.pipe(to).pipe(client);
		}));
	});
	const proxyPort = await listen(proxy);
	return {
		env: { HTTPS_PROXY: `http://127.0.0.1:${proxyPort}`, NO_PROXY: '127.0.0.1,localhost', NODE_EXTRA_CA_CERTS: ca },
		connects,
		async close() {
			for (const s of sockets) s.destroy();
			await Promise.all([new Promise((r) => proxy.close(r)), new Promise((r) => https.close(r))]);
			rmSync(dir, { recursive: true, force: true });
		},
	};
}
