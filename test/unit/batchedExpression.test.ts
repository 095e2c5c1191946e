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
	])('%s reads the item only through $json', (raw, body) => {
		expect(itemLocalExpression(raw)).toBe(body);
	});

	test.each([
		// Other items, nodes or positions: the same text means something else for each item.
		"={{ $('Webhook').item.json.id }}",
		'={{ $input.item.json.id }}',
		'={{ $json.id + $itemIndex }}',
		'={{ $json.id + $runIndex }}',
		'={{ $node["Webhook"].json.id }}',
		'={{ $binary.data.fileName }}',
		'={{ this.$json.id }}',
		'={{ $now.toISO() + $json.id }}',
		'={{ $json[$input.item.json.field] }}',
		// Constructs the check does not follow: left to the engine, per item.
		'={{ $json.items.map(i => i.id).join() }}',
		'={{ $json.items.map((i) => i.id) }}',
		'={{ `k-${$json.id}` }}',
		'={{ $json.id.replace(/"/g, "") + $input.item.json.x }}',
		'={{ $json.a / 2 }}',
		'={{ $json.id // a comment }}',
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
