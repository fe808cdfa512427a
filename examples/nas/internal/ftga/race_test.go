//go:build race

package ftga

// raceEnabled trims the heavier numeric tests under the race detector (they check arithmetic,
// not concurrency; the smaller cases still run).
const raceEnabled = true
