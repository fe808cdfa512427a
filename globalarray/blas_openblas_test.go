//go:build openblas && cgo

package globalarray

import "testing"

func TestOpenBLASBackend(t *testing.T) {
	if got := BLASBackend(); got != "openblas" {
		t.Fatalf("BLASBackend() = %q with the openblas build tag", got)
	}
}
