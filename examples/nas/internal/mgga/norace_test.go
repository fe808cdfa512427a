//go:build !race

package mgga

const raceEnabled = false
