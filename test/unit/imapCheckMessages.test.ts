import { describeImapError } from '../../lib/n8n/channels/imap';

/** What the IMAP check says when it cannot tell: what happened and what to change, never a library's raw text. */
describe('IMAP check: failures in words a flow builder can act on', () => {
	const at = { host: 'imap.example.com', port: 993, user: 'orders@example.com' };
	const say = (error: unknown) => describeImapError(error, at, 30);

	test.each([
		[{ authenticationFailed: true, responseText: 'Invalid credentials (Failure)' }, /^The mail server imap\.example\.com:993 refused the IMAP login of "orders@example\.com" \("Invalid credentials \(Failure\)"\): check the user and password of the IMAP credential \(many providers need an app password/],
		[{ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 10.0.0.1:993' }, /^Nothing accepts IMAP connections at imap\.example\.com:993 \(connection refused\): check the host and port/],
		[{ code: 'ENOTFOUND', message: 'getaddrinfo ENOTFOUND imap.example.com' }, /^The mail server name "imap\.example\.com" could not be found \(ENOTFOUND\): check the host/],
		[{ code: 'CONNECT_TIMEOUT', message: 'Failed to establish connection in required time' }, /^The mail server imap\.example\.com:993 did not answer the IMAP check within 30 s/],
		[{ code: 'GREETING_TIMEOUT', message: 'Failed to receive greeting from server in required time' }, /did not answer the IMAP check within 30 s: check the host and port of the IMAP credential and that n8n can reach them, or raise the Timeout option$/],
		[{ code: 'ECONNRESET', message: 'read ECONNRESET' }, /closed the IMAP connection \(ECONNRESET\): check the port and the SSL\/TLS setting/],
		[{ code: 'DEPTH_ZERO_SELF_SIGNED_CERT', message: 'self-signed certificate' }, /^The certificate of the mail server imap\.example\.com:993 could not be verified \(DEPTH_ZERO_SELF_SIGNED_CERT\): .*turn on "Allow Self-Signed Certificates"/],
		[{ code: 'ERR_TLS_CERT_ALTNAME_INVALID', message: "Hostname/IP does not match certificate's altnames" }, /could not be verified \(ERR_TLS_CERT_ALTNAME_INVALID\): check the host/],
		[
			{ code: 'ERR_SSL_WRONG_VERSION_NUMBER', message: '80:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:../deps/openssl/ssl/record/ssl3_record.c:354:\n' },
			/^The mail server imap\.example\.com:993 does not answer with SSL\/TLS on this port \(ERR_SSL_WRONG_VERSION_NUMBER\)/,
		],
		[{ message: 'Command failed\nwith more\nlines', responseText: 'Server busy' }, /^The IMAP check at imap\.example\.com:993 failed \(Command failed \("Server busy"\)\)$/],
	])('%o', (error, expected) => {
		const detail = say(error);
		expect(detail).toMatch(expected);
		expect(detail).not.toMatch(/\n|\.c:\d+/);
	});
});
