//go:build race

package main

// raceEnabled shortens the full-class runs under the race detector.
const raceEnabled = true
