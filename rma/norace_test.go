//go:build !race

package rma_test

const raceEnabled = false
