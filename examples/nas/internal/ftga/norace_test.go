//go:build !race

package ftga

const raceEnabled = false
