package tcp_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/ibvtest"
	"github.com/goarmci/goarmci/ibv/provider/tcp"
)

// TestConformance runs the provider-independent verbs suite on tcp devices listening on loopback.
func TestConformance(t *testing.T) {
	var n atomic.Int32
	ibvtest.Run(t, ibvtest.Funcs{
		OpenFunc: func(t testing.TB) *ibv.Context {
			t.Helper()
			c, err := tcp.Open(tcp.Config{Name: fmt.Sprintf("tcp%d", n.Add(1)),
				Ports: []tcp.PortConfig{{Listen: "127.0.0.1:0"}}})
			if err != nil {
				t.Fatalf("tcp.Open: %v", err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		Capabilities: ibvtest.Caps{RC: true, UD: true, DC: true, SendRecv: true, Atomics: true, Accumulate: true, APM: true},
	})
}
