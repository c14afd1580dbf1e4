//go:build race

package httpapi_test

// raceEnabled: the race detector allocates on its own, so allocation
// counts are not the product's.
const raceEnabled = true
