/** The key of the unit of work an item belongs to, as the nodes after a Dedupe Gate or Start Step find it. */
export interface UnitKey {
	namespace: string;
	key: string;
	/** Where it was found: `item` (the item's own facts) or the name of the gate it was traced to. */
	via: string;
	/** The gate's claim, when known: the step it claimed and its fencing token. */
	claim?: { step: string; fence: number };
	/** Set when the claim is a Start Step's: the region the item is inside (the step is `claim.step`). */
	region?: { start: string; step: string };
}

/** A unit key as an item's facts carry it, before it is known where it was found. */
export type FactsKey = Omit<UnitKey, 'via'>;
