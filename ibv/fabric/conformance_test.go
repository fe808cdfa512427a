package fabric_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/ibv/ibvtest"
)

// TestConformance runs the provider-independent verbs suite on fabric devices: every device is
// a new node of one fabric with two path bits per port (LMC 1), so the APM case loads an
// alternate path on other path bits.
func TestConformance(t *testing.T) {
	f, err := fabric.New(fabric.Config{Name: "conf", Ports: 1, LMC: 1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close()) })
	ibvtest.Run(t, ibvtest.Funcs{
		OpenFunc: func(t testing.TB) *ibv.Context {
			t.Helper()
			c, err := f.Open(f.AddNode())
			if err != nil {
				t.Fatalf("fabric.Open: %v", err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		Capabilities: ibvtest.Caps{RC: true, UD: true, DC: true, SendRecv: true, Atomics: true, Accumulate: true, APM: true},
	})
}
