package udp_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/ibvtest"
	"github.com/goarmci/goarmci/ibv/provider/udp"
)

// TestConformance runs the provider-independent verbs suite on udp devices bound to loopback.
func TestConformance(t *testing.T) {
	var n atomic.Int32
	ibvtest.Run(t, ibvtest.Funcs{
		OpenFunc: func(t testing.TB) *ibv.Context {
			t.Helper()
			c, err := udp.Open(udp.Config{Name: fmt.Sprintf("udp%d", n.Add(1)),
				Ports: []udp.PortConfig{{Listen: "127.0.0.1:0"}}})
			if err != nil {
				t.Fatalf("udp.Open: %v", err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		Capabilities: ibvtest.Caps{RC: true, UD: true, DC: true, SendRecv: true, Atomics: true, Accumulate: true, APM: true},
	})
}
