//go:build race

package httpapi_test

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = true
