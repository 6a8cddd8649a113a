/** Child runs nest at most this many levels under their root run (docs/workflows/README.md#run_workflow). */
export const MAX_NESTING = 5;
/** A map step takes at most this many items (docs/workflows/README.md#map). */
export const MAP_ITEMS_MAX = 1000;
