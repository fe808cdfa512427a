//go:build !race

package engine

// RaceRelease is a no-op outside race builds (see race_on.go).
func RaceRelease() {}
func raceAcquire() {}

func raceMemLock()   {}
func raceMemUnlock() {}
