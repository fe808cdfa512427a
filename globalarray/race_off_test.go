//go:build !race

package globalarray

const raceEnabled = false
