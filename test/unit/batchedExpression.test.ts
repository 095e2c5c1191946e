import { itemLocalExpression } from '../../lib/n8n/batchedExpression';

describe('which expressions n8n may evaluate for many items in one call', () => {
	test.each([
		["={{ 'k-' + $json.id }}", " 'k-' + $json.id "],
		['={{ $json.email.toLowerCase().trim() }}', ' $json.email.toLowerCase().trim() '],
		['={{ $json.a ?? $json.b }}', ' $json.a ?? $json.b '],
		['={{ $json?.data?.id }}', ' $json?.data?.id '],
		['={{ String($json.id).padStart(8, "0") }}', ' String($json.id).padStart(8, "0") '],
		['={{ $json.n === 1 ? "one" : $json.n !== 2 ? "many" : "two" }}', ' $json.n === 1 ? "one" : $json.n !== 2 ? "many" : "two" '],
		['={{ $json.a <= 1 || $json.b >= 2 || $json.c == 3 || $json.d != 4 }}', ' $json.a <= 1 || $json.b >= 2 || $json.c == 3 || $json.d != 4 '],
		['={{ $json["order id"] + \'-\' + $json.items[0].sku }}', ' $json["order id"] + \'-\' + $json.items[0].sku '],
		['={{ "$input and $(\'X\') in text are only text" + $json.id }}', ' "$input and $(\'X\') in text are only text" + $json.id '],
		['={{ Math.round($json.price * 100) }}', ' Math.round($json.price * 100) '],
		['={{ $json.x.$input }}', ' $json.x.$input '],
		['={{ 1.5 + $json.n }}', ' 1.5 + $json.n '],
		// Division after a value; a regular expression elsewhere (its text is not names).
		['={{ $json.a / 2 }}', ' $json.a / 2 '],
		['={{ ($json.a) / $json.b / 2 }}', ' ($json.a) / $json.b / 2 '],
		["={{ $json.phone.replace(/\\D+/g, '') }}", " $json.phone.replace(/\\D+/g, '') "],
		['={{ $json.email.replace(/[/ $input]/gi, "").trim() }}', ' $json.email.replace(/[/ $input]/gi, "").trim() '],
		["={{ $json.id.replace(/^evt_/, 'k-') / 1 }}", " $json.id.replace(/^evt_/, 'k-') / 1 "],
		['={{ /^\\d+$/.test($json.id) ? $json.id : "x" }}', ' /^\\d+$/.test($json.id) ? $json.id : "x" '],
	])('%s reads the item only through $json', (raw, body) => {
		expect(itemLocalExpression(raw)).toEqual({ body, nodes: [], readsJson: true });
	});

	test.each([
		["={{ $('Webhook').item.json.id }}", ' __paired0(__at).json.id ', ['Webhook'], false],
		['={{ $("Order \'A\' (paid)").item.json.id + $json.n }}', ' __paired0(__at).json.id + $json.n ', ["Order 'A' (paid)"], true],
		["={{ $( 'A' ) . item.json.x + $('B').item.json.y + $(\"A\").item.json.z }}", ' __paired0(__at).json.x + __paired1(__at).json.y + __paired0(__at).json.z ', ['A', 'B'], false],
		["={{ $('A').item?.json?.id ?? $json.id }}", ' __paired0(__at)?.json?.id ?? $json.id ', ['A'], true],
		["={{ \"$('A').item in text\" + $('A').item.json.id }}", ' "$(\'A\').item in text" + __paired0(__at).json.id ', ['A'], false],
		['={{ $json.id + "@" + $now.toFormat("yyyy-MM-dd") }}', ' $json.id + "@" + $now.toFormat("yyyy-MM-dd") ', [], true],
		['={{ $today.toISODate() + $json.id }}', ' $today.toISODate() + $json.id ', [], true],
		["={{ 'row-' + $itemIndex }}", " 'row-' + __at ", [], false],
		["={{ $('A').item.json.id + $itemIndex + $json.n }}", ' __paired0(__at).json.id + __at + $json.n ', ['A'], true],
	])('%s reads the item through $json, $(Node).item and $itemIndex', (raw, body, nodes, readsJson) => {
		expect(itemLocalExpression(raw)).toEqual({ body, nodes, readsJson });
	});

	test.each([
		// Other items, nodes or positions: the same text means something else for each item.
		"={{ $('Webhook').itemMatching(0).json.id }}",
		"={{ $('Webhook').first().json.id + $json.id }}",
		"={{ $('Webhook').items }}",
		"={{ $('Webhook')['item'].json.id }}",
		"={{ $('Webhook')?.item.json.id }}",
		"={{ $('Web' + 'hook').item.json.id }}",
		'={{ $($json.node).item.json.id }}',
		"={{ $('Webhook').pairedItem().json.id }}",
		'={{ $("Order \\"A\\"").item.json.id }}',
		'={{ $input.item.json.id }}',
		'={{ $json.id + $runIndex }}',
		'={{ $now.toISO() }}',
		'={{ $json.id + $vars.prefix }}',
		'={{ $json.id + $execution.id }}',
		'={{ $node["Webhook"].json.id }}',
		'={{ $binary.data.fileName }}',
		'={{ this.$json.id }}',
		'={{ $json[$input.item.json.field] }}',
		// Constructs the check does not follow: left to the engine, per item.
		'={{ $json.items.map(i => i.id).join() }}',
		'={{ $json.items.map((i) => i.id) }}',
		'={{ `k-${$json.id}` }}',
		'={{ $json.id.replace(/"/g, "") + $input.item.json.x }}',
		'={{ $json.id // a comment }}',
		'={{ $json.id /* a comment */ }}',
		'={{ $json.n /= 2 }}',
		'={{ $json.id.replace(/unterminated, "") }}',
		'={{ $json.id.match(/a\nb/) }}',
		// A keyword before a regular expression: read as division, so its text is checked as names.
		'={{ typeof /$input/ + $json.id }}',
		'={{ { a: $json.id } }}',
		'={{ [...$json.ids] }}',
		'={{ $json.id = 1 }}',
		'={{ $json.n += 1 }}',
		'={{ $json.n >>= 1 }}',
		'={{ $json.n ??= 1 }}',
		'={{ $json.n++ }}',
		'={{ delete $json.id }}',
		'={{ new Date() + $json.id }}',
		'={{ "unterminated + $json.id }}',
		'={{ $json.id; $input }}',
		// Not one whole expression, or no item data at all.
		'=k-{{ $json.id + 1 }}',
		'={{ $json.id }}-{{ $json.n + 1 }}',
		"={{ 'constant' }}",
		'plain text',
		42,
		undefined,
	])('%s is evaluated per item', (raw) => {
		expect(itemLocalExpression(raw)).toBeNull();
	});
});
