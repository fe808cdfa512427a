package tcp_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/ibvtest"
	"github.com/goarmci/goarmci/ibv/provider/tcp"
)

// TestConformanceSegments runs the verbs suite with the RC segments the rma runtime uses
// (tcp.DefaultSegmentSize: direct placement, zero-copy sends, the receive low-water mark,
// path-MTU packets for shorter messages) and, without -short, with 256 KiB segments too.
func TestConformanceSegments(t *testing.T) {
	segs := []int{tcp.DefaultSegmentSize, 256 << 10}
	if testing.Short() {
		segs = segs[:1]
	}
	for _, seg := range segs {
		t.Run(fmt.Sprint(seg), func(t *testing.T) {
			var n atomic.Int32
			ibvtest.Run(t, ibvtest.Funcs{
				OpenFunc: func(t testing.TB) *ibv.Context {
					t.Helper()
					c, err := tcp.Open(tcp.Config{Name: fmt.Sprintf("tcp%d", n.Add(1)),
						Ports: []tcp.PortConfig{{Listen: "127.0.0.1:0"}}, SegmentSize: seg})
					if err != nil {
						t.Fatalf("tcp.Open: %v", err)
					}
					t.Cleanup(func() { _ = c.Close() })
					return c
				},
				Capabilities: ibvtest.Caps{RC: true, UD: true, SendRecv: true, Atomics: true, Accumulate: true, APM: true},
			})
		})
	}
}
