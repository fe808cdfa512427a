//go:build !race

package cgga

const raceEnabled = false
